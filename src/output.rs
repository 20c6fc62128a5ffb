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
    /// Every warning printed, so the JSON document can carry them (`warnings`).
    warnings: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// A real run's own lines, for its log (`eas up`: from the first phase on).
    log: std::sync::Arc<std::sync::Mutex<RunLog>>,
    /// The terminal's width, when stderr (`err_columns`) or stdout (`out_columns`) is one: a
    /// longer line is broken between words there, never mid-word by the terminal. The log and
    /// a pipe get the line whole.
    err_columns: Option<usize>,
    out_columns: Option<usize>,
}

/// `text` broken between words into lines of at most `width` columns (escape sequences take
/// none), the later ones indented by the first's own indent plus 4; a word longer than a line
/// stays whole. Pure.
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(20);
    if console::measure_text_width(text) <= width {
        return vec![text.to_string()];
    }
    let indent = text.len() - text.trim_start_matches(' ').len();
    let hang = " ".repeat(indent + 4);
    let mut lines = Vec::new();
    let mut line = " ".repeat(indent);
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let fresh = line.trim().is_empty();
        let wide = console::measure_text_width(&line) + usize::from(!fresh) + console::measure_text_width(word);
        if !fresh && wide > width {
            lines.push(std::mem::replace(&mut line, hang.clone()));
        } else if !fresh {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

fn columns(is_terminal: bool, term: console::Term) -> Option<usize> {
    is_terminal.then(|| term.size_checked().map(|(_, cols)| usize::from(cols))).flatten().filter(|c| *c > 0)
}

/// The lines a run printed on stderr, kept from [`Shell::keep_log`] on; once [`Shell::log_to`]
/// names a file, they are written there and every later line is appended as it is printed.
#[derive(Debug, Default)]
struct RunLog {
    keeping: bool,
    lines: Vec<String>,
    file: Option<std::fs::File>,
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
            warnings: Default::default(),
            log: Default::default(),
            err_columns: columns(term.stderr_is_tty, console::Term::stderr()),
            out_columns: columns(std::io::IsTerminal::is_terminal(&std::io::stdout()), console::Term::stdout()),
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
        self.warnings.lock().unwrap_or_else(|e| e.into_inner()).push(message.as_ref().to_string());
        let text = crate::text::for_people(message.as_ref());
        self.logged(&format!("warning: {text}"));
        let prefix = if self.color { "\x1b[33mwarning\x1b[0m" } else { "warning" };
        self.print(&format!("{prefix}: {text}"));
    }

    /// From now on this invocation's stderr lines are kept for its log (a real `eas up`).
    pub fn keep_log(&self) {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).keeping = true;
    }

    /// The run's log is `path` from now on: every line kept so far is written there (a private
    /// file, appended to: the installer's output goes in the same file), then each later one.
    pub fn log_to(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if !log.keeping {
            return Ok(());
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        let mut text = String::new();
        for l in &log.lines {
            text.push_str(l);
            text.push('\n');
        }
        f.write_all(text.as_bytes())?;
        log.file = Some(f);
        Ok(())
    }

    /// A line for the run's log only (the failure main prints after the run returns).
    pub fn log_only(&self, text: &str) {
        self.logged(text);
    }

    /// A note for the screen only: lines the run's log already holds (a failed build's last
    /// lines, logged as the build printed them).
    pub fn note_unlogged(&self, message: impl AsRef<str>) {
        if !self.quiet {
            self.print(&crate::text::for_people(message.as_ref()));
        }
    }

    /// A line of the failure that ends the command (`error: …`, `next: …`, `REFUSE: …`), broken
    /// between words on a terminal as every other stderr line is; printed even with `--quiet`.
    /// Not logged here: a run logs its failure itself ([`Shell::log_only`]).
    pub fn failure_line(&self, line: &str) {
        self.print(&crate::text::for_people(line));
    }

    fn logged(&self, text: &str) {
        use std::io::Write;
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if !log.keeping {
            return;
        }
        log.lines.push(text.to_string());
        if let Some(f) = log.file.as_mut() {
            // One write per line: the installer's output is appended to the same file.
            let _ = f.write_all(format!("{text}\n").as_bytes());
        }
    }

    fn line(&self, text: &str) {
        self.logged(text);
        self.print(text);
    }

    fn print(&self, text: &str) {
        let text = match self.err_columns {
            Some(width) => wrap_words(text, width).join("\n"),
            None => text.to_string(),
        };
        if self.bars {
            self.multi.suspend(|| eprintln!("{text}"));
        } else {
            eprintln!("{text}");
        }
    }

    /// One line of the command's result on stdout (text; JSON goes through [`Shell::document`]),
    /// with the bars held off the line. The one place a result line is printed.
    pub fn out(&self, line: impl AsRef<str>) {
        let line = match self.out_columns {
            Some(width) => wrap_words(line.as_ref(), width).join("\n"),
            None => line.as_ref().to_string(),
        };
        if self.bars {
            self.multi.suspend(|| println!("{line}"));
        } else {
            println!("{line}");
        }
    }

    /// Keeps `doc` as this invocation's JSON document (the last one handed wins); printed by
    /// `crate::commands::emit` when the command returns.
    pub fn document(&self, doc: serde_json::Value) {
        *self.document.lock().unwrap_or_else(|e| e.into_inner()) = Some(doc);
    }

    /// Every warning printed so far, in order.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The document handed so far, taken out (so it is printed once).
    pub fn take_document(&self) -> Option<serde_json::Value> {
        self.document.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The progress of one wait (SPEC §4: every wait says what it waits for): on a terminal a
    /// spinner reading `waiting for <state>, 0:42 of 1:30`; without one, a plain line when the
    /// state changes, at most one every [`PLAIN_EVERY`].
    pub fn wait(&self, what: &str, timeout: Duration) -> Wait {
        let limit = clock(whole_seconds_up(timeout));
        let bar = if self.bars && !self.quiet {
            let pb = self.multi.add(ProgressBar::new_spinner());
            let template = format!("{{spinner}} {what}: waiting for {{msg}}, {{clock}} of {limit}");
            let style = ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key("clock", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&clock(s.elapsed()));
                });
            pb.set_style(style);
            pb.enable_steady_tick(Duration::from_millis(120));
            Some(pb)
        } else {
            None
        };
        Wait {
            shell: self.clone(),
            what: what.to_string(),
            limit,
            started: std::time::Instant::now(),
            bar,
            printed: std::sync::Mutex::new(None),
        }
    }

    /// A spinner for a wait bounded by `limit`: `<msg> [0:42 of 40:00]`; hidden when bars are off
    /// (the caller's plain lines say the same thing).
    pub fn spinner_within(&self, message: impl Into<String>, limit: Duration) -> ProgressBar {
        let pb = self.spinner(message);
        let template = format!("{{spinner}} {{msg}} [{{clock}} of {}]", clock(whole_seconds_up(limit)));
        if let Ok(style) = ProgressStyle::with_template(&template) {
            pb.set_style(style.with_key("clock", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&clock(s.elapsed()));
            }));
        }
        pb
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

/// Without a terminal, a wait prints at most one line this often.
pub const PLAIN_EVERY: Duration = Duration::from_secs(30);

/// `m:ss` (or `h:mm:ss`), as a wait shows its elapsed time and its timeout.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A wait's timeout as it reads against the elapsed clock: a part second counts as one, so
/// what is left of a 5 s verify after its first few milliseconds still reads `of 0:05`, not
/// `of 0:04` (the elapsed clock rounds down, and starts at `0:00`).
fn whole_seconds_up(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// Without a terminal: whether a wait's new state is printed now. A state that differs from the
/// last printed one is, unless a line went out less than [`PLAIN_EVERY`] ago (then it waits for
/// a later update). Pure.
pub fn plain_due(last: Option<(&str, Duration)>, state: &str) -> bool {
    match last {
        None => true,
        Some((printed, ago)) => printed != state && ago >= PLAIN_EVERY,
    }
}

/// One wait's progress ([`Shell::wait`]); the spinner is cleared when it is dropped.
pub struct Wait {
    shell: Shell,
    what: String,
    limit: String,
    started: std::time::Instant,
    bar: Option<ProgressBar>,
    /// The last plain line's state and when it was printed.
    printed: std::sync::Mutex<Option<(String, std::time::Instant)>>,
}

impl Wait {
    /// What the wait is waiting for now (`gpu-b: plugin CrashLoopBackOff`).
    pub fn update(&self, state: &str) {
        if let Some(pb) = &self.bar {
            pb.set_message(crate::text::for_people(state));
            return;
        }
        if self.shell.quiet {
            return;
        }
        let mut printed = self.printed.lock().unwrap_or_else(|e| e.into_inner());
        let last = printed.as_ref().map(|(s, at)| (s.as_str(), at.elapsed()));
        if plain_due(last, state) {
            self.shell.line(&format!(
                "{}: waiting for {}, {} of {}",
                self.what,
                crate::text::for_people(state),
                clock(self.started.elapsed()),
                self.limit
            ));
            *printed = Some((state.to_string(), std::time::Instant::now()));
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
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
    fn a_wait_reads_elapsed_against_its_timeout() {
        assert_eq!(clock(Duration::from_secs(42)), "0:42");
        assert_eq!(clock(Duration::from_secs(90)), "1:30");
        assert_eq!(clock(Duration::from_secs(2400)), "40:00");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    #[test]
    fn a_long_line_breaks_between_words_with_a_hanging_indent() {
        let line = "warning: the nodes are named like k3d cluster \"gpu\" but the context is not k3d-gpu";
        let lines = wrap_words(line, 40);
        assert_eq!(
            lines,
            ["warning: the nodes are named like k3d", "    cluster \"gpu\" but the context is not", "    k3d-gpu"]
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 40));
        // Indented lines keep their indent; a word wider than the line stays whole; escape
        // sequences take no columns.
        assert_eq!(wrap_words("  | aaaa bbbb", 20), ["  | aaaa bbbb"]);
        let url = "x".repeat(30);
        assert_eq!(
            wrap_words(&format!("  see {url} now please"), 20),
            ["  see", &format!("      {url}"), "      now please"]
        );
        assert_eq!(wrap_words("\x1b[33mwarning\x1b[0m: a b", 20), ["\x1b[33mwarning\x1b[0m: a b"]);
    }

    #[test]
    fn a_timeout_with_a_part_second_left_reads_the_whole_second() {
        let plain = Shell::new(ProgressMode::Plain, &term(false, true), false, 0, true);
        assert_eq!(plain.wait("verify model servers", Duration::from_millis(4_980)).limit, "0:05");
        assert_eq!(plain.wait("verify devices", Duration::from_secs(5)).limit, "0:05");
        assert_eq!(plain.wait("verify devices", Duration::from_millis(5_001)).limit, "0:06");
        assert_eq!(plain.wait("verify devices", Duration::ZERO).limit, "0:00");
    }

    #[test]
    fn without_a_terminal_a_wait_prints_on_a_change_at_most_every_30_s() {
        let s = |n| Duration::from_secs(n);
        assert!(plain_due(None, "gpu-b: plugin Pending"), "the first state is said at once");
        assert!(!plain_due(Some(("gpu-b: plugin Pending", s(45))), "gpu-b: plugin Pending"), "no change, no line");
        assert!(!plain_due(Some(("gpu-b: plugin Pending", s(5))), "gpu-b: plugin CrashLoopBackOff"), "too soon");
        assert!(plain_due(Some(("gpu-b: plugin Pending", s(30))), "gpu-b: plugin CrashLoopBackOff"));
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
