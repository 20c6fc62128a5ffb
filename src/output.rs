//! The single output object (cargo's `Shell`): verbosity, colour, and whether progress is drawn
//! as bars (a terminal) or as plain phase lines (not a terminal, or `CI` set).
//!
//! Logs go to stderr; machine-readable results go to stdout or files, never through here.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing_indicatif::writer::IndicatifWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::settings::Env;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    Auto,
    Tty,
    Plain,
}

/// `--output`: text for people (a table where the result is one), or exactly one JSON document
/// on stdout for machines; logs stay on stderr either way. The command line maps its flag onto it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

impl OutputFormat {
    pub fn is_json(self) -> bool {
        self == OutputFormat::Json
    }
}

/// What the environment says about the terminal; a seam so tests can decide without one.
#[derive(Clone, Debug)]
pub struct Terminal {
    pub stderr_is_tty: bool,
    pub ci: bool,
    pub no_color_env: bool,
}

impl Terminal {
    pub fn from_env(env: &Env) -> Self {
        Terminal {
            stderr_is_tty: env.stderr_is_tty,
            ci: env.nonempty("CI").is_some(),
            no_color_env: env.nonempty("NO_COLOR").is_some(),
        }
    }
}

/// Every line for a person goes through here: phase lines, notes, warnings, tracing's log lines
/// and the spinners all share one [`MultiProgress`], so a line printed while a bar is drawn
/// suspends the bar instead of tearing it.
#[derive(Clone, Debug)]
pub struct Shell {
    pub bars: bool,
    pub color: bool,
    pub quiet: bool,
    pub verbose: u8,
    multi: MultiProgress,
    /// The one JSON document this invocation prints (`--output json`): commands hand it here, and
    /// the command layer prints it once, with the exit code, or an error document in its place.
    document: std::sync::Arc<std::sync::Mutex<Option<serde_json::Value>>>,
}

impl Shell {
    pub fn new(mode: ProgressMode, term: &Terminal, quiet: bool, verbose: u8, no_color: bool) -> Self {
        let bars = match mode {
            ProgressMode::Tty => true,
            ProgressMode::Plain => false,
            ProgressMode::Auto => term.stderr_is_tty && !term.ci,
        };
        let color = !no_color && !term.no_color_env && term.stderr_is_tty;
        let target = if bars { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Shell {
            bars,
            color,
            quiet,
            verbose,
            multi: MultiProgress::with_draw_target(target),
            document: Default::default(),
        }
    }

    /// Installs the tracing subscriber; with bars, log lines go through the shell's
    /// MultiProgress (tracing-indicatif's writer) so they never tear a bar.
    pub fn init_tracing(&self) {
        let level = match (self.quiet, self.verbose) {
            (true, _) => "warn",
            (false, 0) => "info",
            (false, 1) => "debug",
            _ => "trace",
        };
        let filter = tracing_subscriber::EnvFilter::try_from_env("EAS_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("eas={level}")));
        if self.bars {
            let fmt = tracing_subscriber::fmt::layer()
                .with_writer(IndicatifWriter::<tracing_indicatif::writer::Stderr>::new(self.multi.clone()))
                .with_ansi(self.color)
                .with_target(false)
                .without_time();
            let _ = tracing_subscriber::registry().with(filter).with(fmt).try_init();
        } else {
            let fmt = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(self.color)
                .with_target(false)
                .without_time();
            let _ = tracing_subscriber::registry().with(filter).with(fmt).try_init();
        }
    }

    /// One phase line: `==> phase: message`. Printed even in CI, where bars are hidden.
    pub fn phase(&self, phase: &str, message: impl AsRef<str>) {
        if !self.quiet {
            self.line(&format!("==> {phase}: {}", crate::text::for_people(message.as_ref())));
        }
    }

    pub fn note(&self, message: impl AsRef<str>) {
        if !self.quiet {
            self.line(&crate::text::for_people(message.as_ref()));
        }
    }

    pub fn warn(&self, message: impl AsRef<str>) {
        let prefix = if self.color { "\x1b[33mwarning\x1b[0m" } else { "warning" };
        self.line(&format!("{prefix}: {}", crate::text::for_people(message.as_ref())));
    }

    fn line(&self, text: &str) {
        if self.bars {
            self.multi.suspend(|| eprintln!("{text}"));
        } else {
            eprintln!("{text}");
        }
    }

    /// Keeps `doc` as this invocation's JSON document (the last one handed wins); printed by
    /// `crate::document::emit` when the command returns.
    pub fn document(&self, doc: serde_json::Value) {
        *self.document.lock().unwrap_or_else(|e| e.into_inner()) = Some(doc);
    }

    /// The document handed so far, taken out (so it is printed once).
    pub fn take_document(&self) -> Option<serde_json::Value> {
        self.document.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// A spinner for a wait; hidden when bars are off (phase lines say the same thing).
    pub fn spinner(&self, message: impl Into<String>) -> ProgressBar {
        if !self.bars || self.quiet {
            return ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        }
        let pb = self.multi.add(ProgressBar::new_spinner());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.set_message(message.into());
        pb.enable_steady_tick(Duration::from_millis(120));
        pb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(tty: bool, ci: bool) -> Terminal {
        Terminal { stderr_is_tty: tty, ci, no_color_env: false }
    }

    #[test]
    fn auto_draws_bars_only_on_a_terminal_outside_ci() {
        assert!(Shell::new(ProgressMode::Auto, &term(true, false), false, 0, false).bars);
        assert!(!Shell::new(ProgressMode::Auto, &term(true, true), false, 0, false).bars);
        assert!(!Shell::new(ProgressMode::Auto, &term(false, false), false, 0, false).bars);
        assert!(Shell::new(ProgressMode::Tty, &term(false, true), false, 0, false).bars);
        assert!(!Shell::new(ProgressMode::Plain, &term(true, false), false, 0, false).bars);
    }

    #[test]
    fn no_color_wins() {
        let mut t = term(true, false);
        assert!(Shell::new(ProgressMode::Auto, &t, false, 0, false).color);
        assert!(!Shell::new(ProgressMode::Auto, &t, false, 0, true).color);
        t.no_color_env = true;
        assert!(!Shell::new(ProgressMode::Auto, &t, false, 0, false).color);
    }
}
