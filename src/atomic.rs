//! The one atomic-write helper: a synced temporary file in the same directory, renamed over the
//! target, then the directory synced. A reader sees the old file or the new one, never half.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `bytes` to `path`, keeping the mode of the file it replaces (a new file: 0644).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
    write_mode(path, bytes, mode)
}

/// Writes `bytes` to `path`, readable by the user only (0600).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_mode(path, bytes, 0o600)
}

fn write_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".eas-").suffix(".tmp").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename is durable once the directory is synced; a failure here loses nothing.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_keeps_the_mode_and_leaves_no_scratch() {
        let (dir, p) = crate::testing::temp_path("pins.json");
        write(&p, b"one").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((std::fs::read(&p).unwrap(), mode(&p)), (b"one".to_vec(), 0o644));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&p, b"two").unwrap();
        assert_eq!((std::fs::read(&p).unwrap(), mode(&p)), (b"two".to_vec(), 0o640));
        let q = dir.path().join("state.json");
        write_private(&q, b"s").unwrap();
        assert_eq!(mode(&q), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(write(&dir.path().join("missing/x"), b"x").is_err());
    }
}
