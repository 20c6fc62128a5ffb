//! Just enough of a unified diff to name what a patch touches: its files and their hunks.
//!
//! `git apply` does the applying; this reads the patch so a STOP can say which hunk of which file
//! no longer applies, and a decision can cite the lines it was checked against.

/// One file section of a patch.
#[derive(Debug, Clone, PartialEq)]
pub struct FilePatch {
    pub path: String,
    pub hunks: Vec<Hunk>,
}

/// One `@@ -a,b +c,d @@` hunk; `old_start`/`old_len` are the lines of the tree it was written
/// against that it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Hunk {
    pub old_start: u32,
    pub old_len: u32,
    pub new_start: u32,
    pub new_len: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PatchFile {
    pub text: String,
    pub files: Vec<FilePatch>,
}

impl PatchFile {
    pub fn file(&self, path: &str) -> Option<&FilePatch> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Parses a unified diff that only modifies existing files (the overlay never creates, deletes or
/// renames upstream files, so a patch that would is refused here).
pub fn parse(text: &str) -> Result<PatchFile, String> {
    let mut files: Vec<FilePatch> = Vec::new();
    let mut old_path: Option<String> = None;
    let mut remaining: Option<(u32, u32)> = None;
    for line in text.lines() {
        if let Some((old, new)) = remaining.as_mut()
            && (*old > 0 || *new > 0)
        {
            match line.as_bytes().first() {
                Some(b' ') | None => {
                    *old = old.saturating_sub(1);
                    *new = new.saturating_sub(1);
                }
                Some(b'-') => *old = old.checked_sub(1).ok_or("a hunk removes more lines than its header says")?,
                Some(b'+') => *new = new.checked_sub(1).ok_or("a hunk adds more lines than its header says")?,
                Some(b'\\') => {}
                _ => return Err(format!("unexpected line inside a hunk: {line:?}")),
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("--- ") {
            old_path = Some(strip_prefix_dir(rest, "a/")?);
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            let new_path = strip_prefix_dir(rest, "b/")?;
            match old_path.take() {
                Some(old) if old == new_path => files.push(FilePatch { path: new_path, hunks: Vec::new() }),
                Some(old) => {
                    return Err(format!("renames {old} to {new_path}; the overlay only modifies files"));
                }
                None => return Err("a +++ line without its --- line".into()),
            }
        } else if line.starts_with("@@ ") {
            let file = files.last_mut().ok_or("a hunk before any file header")?;
            let h = parse_hunk_header(line)?;
            remaining = Some((h.old_len, h.new_len));
            file.hunks.push(h);
        } else if line.starts_with("new file mode") || line.starts_with("deleted file mode") {
            return Err("creates or deletes a file; the overlay only modifies files".into());
        } else if line.starts_with("rename ") || line.starts_with("copy ") {
            return Err("renames or copies a file; the overlay only modifies files".into());
        } else if line.starts_with("GIT binary patch") || line.starts_with("Binary files") {
            return Err("is a binary patch".into());
        }
    }
    if let Some((old, new)) = remaining
        && (old > 0 || new > 0)
    {
        return Err("the last hunk is shorter than its header says".into());
    }
    if files.is_empty() {
        return Err("names no file".into());
    }
    if let Some(f) = files.iter().find(|f| f.hunks.is_empty()) {
        return Err(format!("{} has no hunk", f.path));
    }
    Ok(PatchFile { text: text.to_string(), files })
}

fn strip_prefix_dir(rest: &str, prefix: &str) -> Result<String, String> {
    let path = rest.split('\t').next().unwrap_or(rest).trim_end();
    if path == "/dev/null" {
        return Err("creates or deletes a file; the overlay only modifies files".into());
    }
    let p = path.strip_prefix(prefix).ok_or_else(|| format!("path {path:?} lacks the {prefix} prefix"))?;
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|c| c == "..") {
        return Err(format!("path {p:?} is not a relative path inside the tree"));
    }
    Ok(p.to_string())
}

fn parse_hunk_header(line: &str) -> Result<Hunk, String> {
    let bad = || format!("malformed hunk header {line:?}");
    let body = line.strip_prefix("@@ -").ok_or_else(bad)?;
    let (old, rest) = body.split_once(" +").ok_or_else(bad)?;
    let (new, _) = rest.split_once(" @@").ok_or_else(bad)?;
    let range = |s: &str| -> Result<(u32, u32), String> {
        match s.split_once(',') {
            Some((a, b)) => Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?)),
            None => Ok((s.parse().map_err(|_| bad())?, 1)),
        }
    };
    let (old_start, old_len) = range(old)?;
    let (new_start, new_len) = range(new)?;
    Ok(Hunk { old_start, old_len, new_start, new_len })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "diff --git a/x/a.yaml b/x/a.yaml\n--- a/x/a.yaml\n+++ b/x/a.yaml\n\
@@ -3,3 +3,4 @@ name\n a\n-b\n+B\n+C\n c\n@@ -20 +21,2 @@\n z\n+y\n\
--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n-p\n+q\n \n";

    #[test]
    fn reads_files_and_hunks() {
        let p = parse(TWO).unwrap();
        assert_eq!(p.files.len(), 2);
        assert_eq!(p.files[0].path, "x/a.yaml");
        assert_eq!(
            p.files[0].hunks,
            vec![
                Hunk { old_start: 3, old_len: 3, new_start: 3, new_len: 4 },
                Hunk { old_start: 20, old_len: 1, new_start: 21, new_len: 2 }
            ]
        );
        assert_eq!(p.file("b.txt").unwrap().hunks[0].old_start, 1);
    }

    #[test]
    fn refuses_patches_that_do_more_than_modify() {
        let cases = [
            ("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+n\n", "creates or deletes"),
            ("diff --git a/n b/n\nnew file mode 100644\n--- a/n\n+++ b/n\n@@ -0,0 +1 @@\n+n\n", "creates or deletes"),
            ("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "renames"),
            ("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "not a relative path"),
            ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", "shorter"),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n-b\n+b\n", "removes more"),
            ("--- a/x\n+++ b/x\n@@ -1 @@\n-a\n", "malformed"),
            ("hello\n", "names no file"),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(want);
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
    }

    #[test]
    fn builtin_patches_touch_only_the_lines_they_need() {
        // Each shipped hunk keeps at most three context lines on either side: never whole files.
        let o = super::super::data::Overlay::builtin().unwrap();
        for r in &o.rows {
            for v in &r.variants {
                let mut leading = 0;
                let mut seen_change = false;
                let mut trailing = 0;
                for line in v.patch.text.lines().skip_while(|l| !l.starts_with("@@")) {
                    if line.starts_with("@@") {
                        leading = 0;
                        seen_change = false;
                        trailing = 0;
                        continue;
                    }
                    if line.starts_with('+') || line.starts_with('-') {
                        seen_change = true;
                        trailing = 0;
                    } else if seen_change {
                        trailing += 1;
                    } else {
                        leading += 1;
                    }
                    assert!(leading <= 3 && trailing <= 3, "{} {}: too much context", r.id, v.name);
                }
            }
        }
    }
}
