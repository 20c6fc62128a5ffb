//! What the unit tests of several modules share.

use std::path::PathBuf;

/// A fresh temporary directory and the path `name` in it, nothing made there yet. The directory
/// goes when its `TempDir` is dropped, so a test keeps that as long as it uses the path.
pub fn temp_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}
