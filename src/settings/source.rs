//! Where each setting came from (issue 32): a flag, the environment, the config file
//! (`eas.yaml`), the last install's record, or eas's default. Settings resolve in that order
//! (flags, else environment, else the file, else the last install, else defaults), and the plan,
//! `down`'s preview and the prompts name the source of every setting that is not a default.

use std::path::PathBuf;

use serde::Serialize;

/// Where one setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag (`--layer`).
    Flag(&'static str),
    /// An environment variable (`EAS_CA_BUNDLE`).
    Env(&'static str),
    /// The config file, as the user would name it (`./eas.yaml`, or the `--config` path).
    File(PathBuf),
    /// The selection the last install recorded (state.json), filled in once the cluster is known.
    LastInstall,
    /// eas's own default: never named.
    Default,
}

impl Source {
    /// The source as the plan names it after `from`: `--layer`, `EAS_CA_BUNDLE`, `./eas.yaml`,
    /// `the last install`; None for a default.
    pub fn name(&self) -> Option<String> {
        match self {
            Source::Flag(f) => Some((*f).to_string()),
            Source::Env(v) => Some((*v).to_string()),
            Source::File(p) => Some(p.display().to_string()),
            Source::LastInstall => Some("the last install".to_string()),
            Source::Default => None,
        }
    }

    /// The kind as one word for JSON: `flag`, `env`, `file`, `last-install`, `default`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Flag(_) => "flag",
            Source::Env(_) => "env",
            Source::File(_) => "file",
            Source::LastInstall => "last-install",
            Source::Default => "default",
        }
    }
}

/// One setting that is not a default: its key (as `eas.yaml` spells it), its value as shown,
/// and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: &'static str,
    pub value: String,
    pub source: Source,
}

impl Setting {
    /// `context k3d-gpu (from ./eas.yaml)`.
    pub fn line(&self) -> String {
        match self.source.name() {
            Some(from) => format!("{} {} (from {from})", self.key, self.value),
            None => format!("{} {}", self.key, self.value),
        }
    }
}

/// eas-plan/v1's `settings[]`: `{"key", "value", "source": kind, "from": name}`.
impl Serialize for Setting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Setting", 4)?;
        st.serialize_field("key", self.key)?;
        st.serialize_field("value", &self.value)?;
        st.serialize_field("source", self.source.kind())?;
        st.serialize_field("from", &self.source.name())?;
        st.end()
    }
}

/// The settings of one command that are not defaults, in the order they were resolved. A key
/// not here is a default, which a later layer (the last install) may still fill.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources(Vec<Setting>);

impl Sources {
    /// Records `key` = `value` from `source` (a default is not recorded); a key set again is
    /// replaced in place.
    pub fn set(&mut self, key: &'static str, value: impl Into<String>, source: Source) {
        self.0.retain(|s| s.key != key);
        if source != Source::Default {
            self.0.push(Setting { key, value: value.into(), source });
        }
    }

    /// Where `key` came from; [`Source::Default`] when nothing set it.
    pub fn of(&self, key: &str) -> Source {
        self.0.iter().find(|s| s.key == key).map_or(Source::Default, |s| s.source.clone())
    }

    /// `value` as a prompt or preview names `key`: with its source when that is not a default
    /// (`k3d-gpu (from ./eas.yaml)`).
    pub fn named(&self, key: &str, value: &str) -> String {
        match self.of(key).name() {
            Some(from) => format!("{value} (from {from})"),
            None => value.to_string(),
        }
    }

    /// Whether anything but the default set `key` (what the last install may still fill).
    pub fn is_set(&self, key: &str) -> bool {
        self.of(key) != Source::Default
    }

    /// These, then `more`'s (the global settings first, then the command's).
    pub fn chain(&self, more: &Sources) -> Vec<Setting> {
        self.0.iter().chain(more.0.iter()).cloned().collect()
    }
}

/// Resolves one setting the one way (flag, else environment, else the config file), records
/// its source in `sources` and returns the value; None leaves the default (or a later layer).
/// `show` renders the value as the plan names it.
pub fn pick<T>(
    sources: &mut Sources,
    key: &'static str,
    layers: [Option<(T, Source)>; 3],
    show: impl Fn(&T) -> String,
) -> Option<T> {
    let (value, source) = layers.into_iter().flatten().next()?;
    sources.set(key, show(&value), source);
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_layer_that_has_a_value_wins_and_is_named() {
        let mut s = Sources::default();
        let file = || Some(("b".to_string(), Source::File("./eas.yaml".into())));
        let got = pick(&mut s, "context", [None, None, file()], String::clone);
        assert_eq!(got.as_deref(), Some("b"));
        let lines = |s: &Sources| s.chain(&Sources::default()).iter().map(Setting::line).collect::<Vec<_>>();
        assert_eq!(lines(&s), ["context b (from ./eas.yaml)"]);
        let flag = Some(("a".to_string(), Source::Flag("--context")));
        assert_eq!(pick(&mut s, "context", [flag, None, file()], String::clone).as_deref(), Some("a"));
        assert_eq!(s.of("context"), Source::Flag("--context"), "set again: replaced");
        assert_eq!(lines(&s).len(), 1);
        assert_eq!(pick::<String>(&mut s, "layer", [None, None, None], String::clone), None);
        assert!(!s.is_set("layer"), "nothing set it: a default");
        s.set("model", "llama-3-1-8b", Source::LastInstall);
        assert_eq!(lines(&s).last().unwrap(), "model llama-3-1-8b (from the last install)");
        assert_eq!(s.named("model", "m"), "m (from the last install)");
        assert_eq!(s.named("layer", "inference"), "inference", "a default is named without a source");
        s.set("model", "x", Source::Default);
        assert!(!s.is_set("model"), "a default is never named");
    }

    #[test]
    fn a_setting_serialises_with_its_kind_and_name() {
        let s = Setting { key: "ca_bundle", value: "/ca.pem".into(), source: Source::Env("EAS_CA_BUNDLE") };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"key": "ca_bundle", "value": "/ca.pem", "source": "env", "from": "EAS_CA_BUNDLE"})
        );
    }
}
