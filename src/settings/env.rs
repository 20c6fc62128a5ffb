//! The one environment seam (rustup's `process.rs`): the variables, the home directory and the
//! terminal, read from the process once in `main` and passed down. Tests build their own.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
    /// Whether stderr is a terminal (progress bars, colour).
    pub stderr_is_tty: bool,
    /// The command line as the user typed it (non-UTF-8 words lossily): the plan's header repeats
    /// it as the command that applies the plan.
    pub args: Vec<String>,
}

impl Env {
    /// The process's environment (non-UTF-8 values are left out) and terminal.
    pub fn from_process() -> Self {
        Env {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
            stderr_is_tty: std::io::stderr().is_terminal(),
            args: std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect(),
        }
    }

    /// A fixed environment (tests).
    #[cfg(test)]
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        Env {
            vars: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            stderr_is_tty: false,
            args: Vec::new(),
        }
    }

    /// A variable's value, as set (possibly empty).
    pub fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }

    /// A variable's value when set and not empty.
    pub fn nonempty(&self, name: &str) -> Option<String> {
        self.vars.get(name).filter(|v| !v.is_empty()).cloned()
    }

    /// `$HOME`, when set.
    pub fn home(&self) -> Option<PathBuf> {
        self.nonempty("HOME").map(PathBuf::from)
    }

    /// `$XDG_CACHE_HOME`, else `~/.cache`.
    pub fn cache_home(&self) -> Option<PathBuf> {
        self.nonempty("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| self.home().map(|h| h.join(".cache")))
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config` (where the user's pins file lives).
    pub fn config_home(&self) -> Option<PathBuf> {
        self.nonempty("XDG_CONFIG_HOME").map(PathBuf::from).or_else(|| self.home().map(|h| h.join(".config")))
    }

    /// Where the pins come from, for a command given `--pins flag` (SPEC §1: the flag, else
    /// `EAS_PINS`, else the config file's `pins:` (`file`), else the user's pins file when it
    /// exists, else the built-in pins).
    pub fn pins_source(&self, flag: Option<&std::path::Path>, file: Option<&std::path::Path>) -> crate::pins::Source {
        let eas_pins = self.nonempty(crate::pins::source::ENV_VAR);
        crate::pins::Source::resolve(flag, eas_pins.as_deref(), file, self.config_home().as_deref())
    }

    /// The user's pins file, whether or not it exists (`pins lock` writes it).
    pub fn user_pins(&self) -> Option<PathBuf> {
        crate::pins::source::user_file(self.config_home().as_deref())
    }

    /// A lookup function over this environment, for code that takes `&dyn Fn(&str) -> Option<String>`.
    pub fn lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        move |n| self.var(n)
    }
}
