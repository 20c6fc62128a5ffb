//! Shell completions (`eas completions SHELL`) and man pages (`eas man --out DIR`), both generated
//! from the clap definition so they never drift from the real arguments.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell as CompletionShell;

/// Why a completion script or the man pages could not be written; the command edge kinds them
/// (a bad `--out` is bad input, exit 2; a write that failed exit 1).
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    #[error(transparent)]
    Completions(std::io::Error),
    #[error("--out {} exists and is not a directory", .0.display())]
    NotADir(std::path::PathBuf),
    #[error(transparent)]
    Render(std::io::Error),
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes the completion script for `shell` to `out` (stdout in the command).
pub fn completions(shell: CompletionShell, out: &mut dyn Write) -> Result<(), DocsError> {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "eas", &mut buf);
    out.write_all(&buf).map_err(DocsError::Completions)
}

/// One rendered man page: its file name (`eas-up.1`) and its roff text.
#[derive(Debug)]
pub struct Page {
    pub file: String,
    pub roff: Vec<u8>,
}

/// A page for `eas` and for every (non-hidden) subcommand, nested ones too (`eas-pins-check.1`).
pub fn man_pages() -> Result<Vec<Page>, std::io::Error> {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    collect(cmd, &mut pages)?;
    Ok(pages)
}

fn collect(cmd: clap::Command, pages: &mut Vec<Page>) -> Result<(), std::io::Error> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        collect(sub, pages)?;
    }
    let man = clap_mangen::Man::new(cmd).source(format!("eas {}", env!("CARGO_PKG_VERSION"))).manual("eas");
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    let file = man.get_filename();
    let stem = file.trim_end_matches(".1");
    let roff = with_sections(title_first(roff), &extra_sections(examples(stem)));
    pages.push(Page { file, roff });
    Ok(())
}

/// Each page's EXAMPLES: (what it does, the command line). A test parses every line with the
/// real argument parser, so an example cannot name a flag that does not exist.
pub fn examples(page: &str) -> &'static [(&'static str, &'static str)] {
    match page {
        "eas" => &[
            ("See what `eas up` would do, writing nothing", "eas up --dry-run"),
            ("Install, without a question", "eas up --yes"),
            ("What is installed, and how it is now", "eas status"),
            ("Remove what `eas up` installed", "eas down --yes"),
        ],
        "eas-up" => &[
            ("Print the plan; nothing is written", "eas up --dry-run"),
            ("The plan as JSON, and the generated files", "eas up --dry-run --output json --out plan"),
            (
                "Install the inference layer with a chosen model",
                "eas up --yes --layer inference --model qwen2-5-coder-7b",
            ),
        ],
        "eas-down" => &[
            ("Remove what `eas up` installed, and nothing else", "eas down --yes"),
            ("Also remove this cluster's state directory", "eas down --yes --purge"),
        ],
        "eas-status" => &[("For a person", "eas status"), ("For a script (eas-status/v1)", "eas status --output json")],
        "eas-verify" => &[
            ("Check the devices and the model servers", "eas verify"),
            ("One JSON document (eas-verify/v1), waiting at most 10 minutes", "eas verify --output json --timeout 600"),
        ],
        "eas-doctor" => &[("Run the read-only checks of `eas up`", "eas doctor")],
        "eas-init" => &[
            ("Write ./eas.yaml for the current cluster, every choice commented", "eas init"),
            (
                "Print it instead, declaring a node's containerd config",
                "eas init -o - --containerd-config node-1=config.toml",
            ),
        ],
        "eas-support-bundle" => &[
            ("Collect a redacted bundle to attach to a report", "eas support-bundle"),
            ("Write it where you choose", "eas support-bundle --out /tmp/eas-support.tar.gz"),
        ],
        "eas-fit" => &[("Size the model candidates on a gathered cluster", "eas fit --facts facts.json")],
        "eas-facts" => &[
            ("Gather the facts document", "eas facts --out facts.json"),
            (
                "Supply a node eas cannot read",
                "eas facts --out facts.json --containerd-config gpu-1=gpu-1-config.toml --nri-socket gpu-1=present",
            ),
        ],
        "eas-config" => {
            &[("Generate the configuration with every source", "eas config --facts facts.json --out cfg --explain")]
        }
        "eas-overlay" => {
            &[("Decide the patches on a clone", "eas overlay --repo enterprise-ai-solutions --facts facts.json")]
        }
        "eas-pins" | "eas-pins-show" => &[
            ("The pins every command reads, and from where", "eas pins show"),
            ("Save them as a file to edit and pass back with --pins", "eas pins show --output json"),
        ],
        "eas-pins-check" => &[("Report unlocked rows and artifacts without a sha256", "eas pins check")],
        "eas-pins-lock" => &[
            ("Lock the pins in place (the built-in ones into the user's pins file)", "eas pins lock"),
            ("Lock a file of one's own", "eas pins lock --pins my-pins.json"),
        ],
        "eas-bastion" | "eas-bastion-build" => &[
            ("Build or reuse the bastion image", "eas bastion build"),
            ("Record the sha256 of each artifact, checked against its publisher", "eas bastion build --lock"),
        ],
        "eas-bastion-run" => &[("Run a command in the bastion", "eas bastion run -- ansible --version")],
        "eas-schema" => &[("List the documents", "eas schema"), ("Print the plan's schema", "eas schema eas-plan/v1")],
        "eas-completions" => &[("Completions for bash", "eas completions bash")],
        "eas-man" => &[("Install the pages for the current user", "eas man --out man1")],
        _ => &[],
    }
}

/// SPEC section 2, for every page: the codes are one contract across the commands.
const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "success (a dry run that printed its plan is a success)"),
    ("1", "a step failed at run time (the message names it and the next command); a declined prompt"),
    ("2", "bad input: a usage error, a malformed file, a floating ref; nothing written"),
    ("3", "refusal: eas will not install onto this cluster with these inputs (REFUSE: lines); nothing written"),
    ("4", "overlay STOP: a patch no longer applies to the pinned EAS tree"),
    ("5", "installed, but verification failed"),
    ("130", "interrupted (Ctrl-C, SIGTERM); what eas started is stopped"),
];

/// `text` as roff body text: hyphens as minus signs (so they copy as `-`), backslashes escaped,
/// and a leading `.` or `'` kept from reading as a request.
fn roff_text(text: &str) -> String {
    let s = text.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') { format!("\\&{s}") } else { s }
}

/// The EXAMPLES (when the page has any) and EXIT STATUS sections, as roff.
fn extra_sections(examples: &[(&str, &str)]) -> String {
    let mut out = String::new();
    if !examples.is_empty() {
        out.push_str(".SH EXAMPLES\n");
        for (what, line) in examples {
            out.push_str(&format!(".TP\n{}\n.EX\n{}\n.EE\n", roff_text(what), roff_text(line)));
        }
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_STATUS {
        out.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff_text(meaning)));
    }
    out
}

/// `sections` placed before clap_mangen's closing VERSION section (or at the end).
fn with_sections(roff: Vec<u8>, sections: &str) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(&roff).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    match text.find("\n.SH VERSION") {
        Some(i) => text.insert_str(i + 1, sections),
        None => text.push_str(sections),
    }
    text.into_bytes()
}

/// clap_mangen opens with a two-line `.ie/.el` definition of the `Aq` string before `.TH`; man(7)
/// and `whatis` indexers expect `.TH` as the first request, so it is moved up. The title line
/// itself never uses `Aq` (name, section, date, source, manual carry no apostrophe).
fn title_first(roff: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&roff);
    let mut lines: Vec<&str> = text.lines().collect();
    match lines.iter().position(|l| l.starts_with(".TH ")) {
        Some(i) if i > 0 && !lines[i].contains("\\*(Aq") => {
            let th = lines.remove(i);
            lines.insert(0, th);
            let mut out = lines.join("\n");
            out.push('\n');
            out.into_bytes()
        }
        _ => roff,
    }
}

/// `eas man --out DIR`: renders every page first, then writes them; a bad DIR writes nothing.
pub fn man_command(out: &Path) -> Result<Vec<String>, DocsError> {
    if out.exists() && !out.is_dir() {
        return Err(DocsError::NotADir(out.to_path_buf()));
    }
    let pages = man_pages().map_err(DocsError::Render)?;
    std::fs::create_dir_all(out).map_err(|source| DocsError::Create { path: out.to_path_buf(), source })?;
    let mut written = Vec::with_capacity(pages.len());
    for page in &pages {
        let path = out.join(&page.file);
        let tmp = out.join(format!(".{}.tmp", page.file));
        std::fs::write(&tmp, &page.roff)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|source| DocsError::Write { path: path.clone(), source })?;
        written.push(page.file.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every leaf and branch of the command tree, as the man page file stem clap_mangen uses.
    fn all_commands(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        let name = if prefix.is_empty() { cmd.get_name().to_string() } else { format!("{prefix}-{}", cmd.get_name()) };
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                all_commands(sub, &name, out);
            }
        }
        out.push(name);
    }

    #[test]
    fn every_command_has_a_page_that_starts_with_th() {
        let pages = man_pages().expect("render");
        let mut expected = Vec::new();
        all_commands(&super::super::Cli::command(), "", &mut expected);
        let files: Vec<&str> = pages.iter().map(|p| p.file.as_str()).collect();
        for name in &expected {
            let file = format!("{name}.1");
            assert!(files.contains(&file.as_str()), "no page for {name}: {files:?}");
        }
        assert_eq!(files.len(), expected.len(), "pages: {files:?}");
        for name in ["eas-up", "eas-pins-check", "eas-bastion", "eas-completions", "eas-man"] {
            assert!(expected.contains(&name.to_string()), "{name} is not a command");
        }
        for page in &pages {
            let text = String::from_utf8_lossy(&page.roff);
            assert!(text.starts_with(".TH"), "{} starts with {:?}", page.file, &text[..text.len().min(40)]);
        }
    }

    #[test]
    fn up_page_documents_its_flags() {
        let pages = man_pages().expect("render");
        let up = pages.iter().find(|p| p.file == "eas-up.1").expect("eas-up.1");
        let text = String::from_utf8_lossy(&up.roff);
        assert!(text.contains("dry\\-run"), "{text}");
    }

    #[test]
    fn every_page_has_exit_status_and_each_command_page_examples_that_parse() {
        use clap::Parser;
        for page in man_pages().expect("render") {
            let text = String::from_utf8_lossy(&page.roff);
            let stem = page.file.trim_end_matches(".1");
            assert!(text.contains(".SH \"EXIT STATUS\"\n"), "{}", page.file);
            assert!(text.contains("\\fB130\\fR"), "{}", page.file);
            assert!(!examples(stem).is_empty(), "{} has no EXAMPLES", page.file);
            assert!(text.contains(".SH EXAMPLES\n"), "{}", page.file);
            for (_, line) in examples(stem) {
                let words: Vec<&str> = line.split_whitespace().collect();
                // The files an example names do not exist here; every other error is the example's.
                match super::super::Cli::try_parse_from(&words) {
                    Err(e) if !e.to_string().contains(" is not a file ") => {
                        panic!("{}: example {line:?} does not parse: {e}", page.file)
                    }
                    _ => {}
                }
                assert!(text.contains(&roff_text(line)), "{}: {line:?} not on the page", page.file);
            }
            let version = text.find(".SH VERSION").unwrap_or(text.len());
            assert!(text.find(".SH \"EXIT STATUS\"").unwrap() < version, "{}: after VERSION", page.file);
        }
    }

    #[test]
    fn a_file_as_out_is_bad_input_and_writes_nothing() {
        let (dir, file) = crate::testing::temp_path("f");
        std::fs::write(&file, "x").unwrap();
        let err = man_command(&file).unwrap_err();
        // Bad input at the command edge (exit 2; `commands::edge`'s tests).
        assert!(matches!(err, DocsError::NotADir(_)), "{err:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
