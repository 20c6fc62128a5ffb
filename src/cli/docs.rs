//! Shell completions (`eas completions SHELL`) and man pages (`eas man --out DIR`), both generated
//! from the clap definition so they never drift from the real arguments.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell as CompletionShell;

use crate::error::Failure;

/// Writes the completion script for `shell` to `out` (stdout in the command).
pub fn completions(shell: CompletionShell, out: &mut dyn Write) -> Result<(), Failure> {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "eas", &mut buf);
    out.write_all(&buf).map_err(|e| Failure::step("completions", e))
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
    pages.push(Page { file: man.get_filename(), roff: title_first(roff) });
    Ok(())
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
pub fn man_command(out: &Path) -> Result<Vec<String>, Failure> {
    if out.exists() && !out.is_dir() {
        return Err(Failure::bad_input(
            format!("--out {} exists and is not a directory", out.display()),
            "pass a directory (it is created when missing)",
        ));
    }
    let pages = man_pages().map_err(|e| Failure::step("man", e))?;
    std::fs::create_dir_all(out).map_err(|e| {
        Failure::bad_input(format!("cannot create {}: {e}", out.display()), "pass a writable directory")
    })?;
    let mut written = Vec::with_capacity(pages.len());
    for page in &pages {
        let path = out.join(&page.file);
        let tmp = out.join(format!(".{}.tmp", page.file));
        std::fs::write(&tmp, &page.roff)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| Failure::step("man", format!("{}: {e}", path.display())))?;
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
    fn a_file_as_out_is_bad_input_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = man_command(&file).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
