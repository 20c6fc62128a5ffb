//! Where the pins come from, decided one way for every command that reads them (SPEC §1):
//! `--pins FILE`, else `EAS_PINS`, else the user's pins file (`$XDG_CONFIG_HOME/eas/pins.json`,
//! else `~/.config/eas/pins.json`) when it exists, else the pins built into eas.
//!
//! The choice is a pure function of the flag, `EAS_PINS`, the config directory and whether the
//! user's file exists ([`Source::pick`]); [`Source::resolve`] adds the one `stat`. The values
//! come from the environment seam (`settings::Env::pins_source`), so this module reads no
//! variable itself. Paths are made absolute when picked, so plans and warnings name the file
//! whatever directory a later reader is in.

use std::path::{Path, PathBuf};

use super::{EMBEDDED, Pins, PinsError};

/// The environment variable naming a pins file (below `--pins`, above the user's file).
pub const ENV_VAR: &str = "EAS_PINS";

/// The pins file one command reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Source {
    /// `--pins FILE`.
    Flag(PathBuf),
    /// `EAS_PINS`.
    Env(PathBuf),
    /// The config file's `pins:` (below `EAS_PINS`, above the user's file).
    File(PathBuf),
    /// The user's pins file, which exists.
    User(PathBuf),
    /// The pins compiled into this binary.
    #[default]
    Builtin,
}

/// The user's pins file in `config_home` (`$XDG_CONFIG_HOME`, else `~/.config`), whether or not
/// it exists; None without a config directory.
pub fn user_file(config_home: Option<&Path>) -> Option<PathBuf> {
    config_home.map(|d| absolute(&d.join("eas").join("pins.json")))
}

/// `p` made absolute against the working directory (it need not exist); left as given when
/// the working directory cannot be read, which only makes a message less precise.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Source {
    /// The resolution rule, without touching the file system: `eas_pins` is `EAS_PINS` when set
    /// and not empty, `user` the user's pins file ([`user_file`]), `user_exists` whether it is there.
    pub fn pick(
        flag: Option<&Path>,
        eas_pins: Option<&str>,
        file: Option<&Path>,
        user: Option<PathBuf>,
        user_exists: &dyn Fn(&Path) -> bool,
    ) -> Source {
        if let Some(f) = flag {
            return Source::Flag(absolute(f));
        }
        if let Some(e) = eas_pins.filter(|e| !e.is_empty()) {
            return Source::Env(absolute(Path::new(e)));
        }
        if let Some(f) = file {
            return Source::File(absolute(f));
        }
        match user {
            Some(u) if user_exists(&u) => Source::User(u),
            _ => Source::Builtin,
        }
    }

    /// [`Source::pick`] with the user's file looked for on disk.
    pub fn resolve(
        flag: Option<&Path>,
        eas_pins: Option<&str>,
        file: Option<&Path>,
        config_home: Option<&Path>,
    ) -> Source {
        Source::pick(flag, eas_pins, file, user_file(config_home), &|p: &Path| p.is_file())
    }

    /// The file read, absolute; None for the built-in pins.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::Flag(p) | Source::Env(p) | Source::File(p) | Source::User(p) => Some(p),
            Source::Builtin => None,
        }
    }

    /// How the file was chosen, as a word for JSON (`flag`, `env`, `user`, `builtin`).
    pub fn origin(&self) -> &'static str {
        match self {
            Source::Flag(_) => "flag",
            Source::Env(_) => "env",
            Source::File(_) => "file",
            Source::User(_) => "user",
            Source::Builtin => "builtin",
        }
    }

    /// The `pins_source` string of plans and pins show: the absolute path, or `built-in`.
    pub fn label(&self) -> String {
        match self.path() {
            Some(p) => p.display().to_string(),
            None => "built-in".to_string(),
        }
    }

    /// One phrase for people: the file and why it was chosen.
    pub fn describe(&self) -> String {
        match self {
            Source::Flag(p) => format!("{} (--pins)", p.display()),
            Source::Env(p) => format!("{} ({ENV_VAR})", p.display()),
            Source::File(p) => format!("{} (the config file's pins:)", p.display()),
            Source::User(p) => format!("{} (the user's pins file)", p.display()),
            Source::Builtin => format!("the pins built into eas {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// The pins this source holds.
    pub fn load(&self) -> Result<Pins, PinsError> {
        Pins::load(self.path())
    }

    /// The file `pins lock` and `bastion build --lock` rewrite, and the pins to lock in it:
    /// the chosen file, or, for the built-in pins, the user's pins file (written when the lock
    /// succeeds, so a failed lock leaves nothing behind).
    /// `user` is [`user_file`].
    pub fn lock_target(&self, user: Option<PathBuf>) -> Result<(PathBuf, Pins), PinsError> {
        match self.path() {
            Some(p) => Ok((p.to_path_buf(), self.load()?)),
            None => {
                let path = user.ok_or(PinsError::NoUserFile)?;
                Ok((path, Pins::parse(EMBEDDED)?))
            }
        }
    }
}

/// Writes `pins` to `path`, creating its directory (the user's config directory may not exist).
pub fn write(path: &Path, pins: &Pins) -> Result<(), PinsError> {
    let err = |source| PinsError::Write { path: path.display().to_string(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    crate::atomic::write(path, pins.to_json().as_bytes()).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::settings::Env;

    fn pick(flag: Option<&str>, vars: &[(&str, &str)], user_exists: bool) -> Source {
        let env = Env::of(vars);
        let user = user_file(env.config_home().as_deref());
        Source::pick(flag.map(Path::new), env.var(ENV_VAR).as_deref(), None, user, &|_: &Path| user_exists)
    }

    #[test]
    fn the_flag_wins_then_the_variable_then_the_user_file_then_the_built_in_pins() {
        let home = [("HOME", "/home/u"), (ENV_VAR, "/etc/eas-pins.json")];
        assert_eq!(pick(Some("/tmp/p.json"), &home, true), Source::Flag("/tmp/p.json".into()));
        assert_eq!(pick(None, &home, true), Source::Env("/etc/eas-pins.json".into()));
        assert_eq!(pick(None, &[("HOME", "/home/u")], true), Source::User("/home/u/.config/eas/pins.json".into()));
        assert_eq!(pick(None, &[("HOME", "/home/u")], false), Source::Builtin);
        assert_eq!(pick(None, &[], true), Source::Builtin, "no HOME and no XDG_CONFIG_HOME: no user file");
    }

    #[test]
    fn xdg_config_home_places_the_user_file_and_an_empty_variable_counts_as_unset() {
        let vars = [("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/cfg"), (ENV_VAR, "")];
        assert_eq!(pick(None, &vars, true), Source::User("/cfg/eas/pins.json".into()));
    }

    #[test]
    fn relative_paths_are_named_absolutely() {
        let s = pick(Some("pins.json"), &[], false);
        let p = s.path().unwrap();
        assert!(p.is_absolute() && p.ends_with("pins.json"), "{p:?}");
        assert_eq!(s.label(), p.display().to_string());
        assert_eq!(Source::Builtin.label(), "built-in");
    }

    #[test]
    fn locking_the_built_in_pins_targets_the_user_file_with_the_embedded_rows() {
        let (path, pins) = Source::Builtin.lock_target(user_file(Some(Path::new("/cfg")))).unwrap();
        assert_eq!(path, PathBuf::from("/cfg/eas/pins.json"));
        assert_eq!(pins, Pins::parse(EMBEDDED).unwrap());
        assert!(matches!(Source::Builtin.lock_target(user_file(None)), Err(PinsError::NoUserFile)));
    }
}
