//! Writing an output directory all or nothing: every file is written into a scratch directory
//! beside the outputs and renamed into place only when all of them exist; a refusal removes
//! stale outputs of an earlier run and writes none.

use std::fs;
use std::io;
use std::path::Path;

/// Whether a file name is one `eas config` or `eas up --dry-run --out` writes.
pub fn is_output(name: &str) -> bool {
    matches!(
        name,
        "eas-overrides.yaml"
            | "global_config.edit.yaml"
            | "models.edit.yaml"
            | "choices.txt"
            | "plan.json"
            | "plan.txt"
    ) || (name.starts_with("repos.") && name.ends_with(".yaml"))
}

/// Removes every output file left in `out` by an earlier run. A missing directory is fine.
pub fn clear(out: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(out) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() && entry.file_name().to_str().is_some_and(is_output) {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Replaces the outputs in `out` with `files`.
pub fn replace(out: &Path, files: &[(String, String)]) -> io::Result<()> {
    fs::create_dir_all(out)?;
    let scratch = tempfile::Builder::new().prefix(".eas-out-").tempdir_in(out)?;
    for (name, text) in files {
        fs::write(scratch.path().join(name), text)?;
    }
    // Stale outputs that this run does not produce (another layer's manifest) go first.
    for entry in fs::read_dir(out)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_output(name) && !files.iter().any(|(n, _)| n == name) && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
        }
    }
    for (name, _) in files {
        fs::rename(scratch.path().join(name), out.join(name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_then_clear() {
        let (dir, out) = crate::testing::temp_path("out");
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("repos.inference.yaml"), "old").unwrap();
        fs::write(out.join("notes.md"), "mine").unwrap();
        replace(&out, &[("choices.txt".into(), "a\n".into()), ("repos.agent-toolkit.yaml".into(), "b".into())])
            .unwrap();
        let mut names: Vec<String> =
            fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["choices.txt", "notes.md", "repos.agent-toolkit.yaml"]);
        clear(&out).unwrap();
        let names: Vec<String> =
            fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, ["notes.md"]);
        clear(&dir.path().join("missing")).unwrap();
    }
}
