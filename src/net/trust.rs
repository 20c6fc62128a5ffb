//! What a `--ca-bundle` may hold: certificates, nothing else. A private key in a bundle would be
//! built into the bastion image and merged into its system trust store, readable by anyone who
//! pulls the image, so a bundle with any other PEM block is bad input (exit 2).

/// The DER certificates of a PEM bundle, or why it is not a bundle of certificates.
pub fn certificates_only(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let blocks = pem::parse_many(bytes).map_err(|e| format!("is not PEM: {e}"))?;
    let mut certs = Vec::new();
    for b in blocks {
        match b.tag() {
            "CERTIFICATE" => certs.push(b.into_contents()),
            tag if tag.contains("PRIVATE KEY") => {
                return Err(format!("holds a private key ({tag}): a CA bundle must hold certificates only"));
            }
            tag => return Err(format!("holds a {tag} block: a CA bundle must hold certificates only")),
        }
    }
    if certs.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(certs)
}

/// The CA file git is given through `GIT_SSL_CAINFO` (the environment, never argv) when a
/// `--ca-bundle` is set: git's CA file replaces its default store, so it holds the system's
/// certificates plus the bundle's. Removed when dropped.
pub struct GitCaFile(tempfile::TempPath);

impl GitCaFile {
    pub fn write(extra: &[Vec<u8>]) -> std::io::Result<GitCaFile> {
        let mut text = String::new();
        let system = rustls_native_certs::load_native_certs().certs;
        let ders = system.iter().map(|c| c.as_ref()).chain(extra.iter().map(Vec::as_slice));
        for der in ders {
            text.push_str(&pem::encode(&pem::Pem::new("CERTIFICATE", der.to_vec())));
        }
        let mut f = tempfile::Builder::new().prefix("eas-git-ca-").suffix(".pem").tempfile()?;
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        Ok(GitCaFile(f.into_temp_path()))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(tag: &str) -> String {
        format!("-----BEGIN {tag}-----\nAQID\n-----END {tag}-----\n")
    }

    #[test]
    fn only_certificates_pass() {
        let two = format!("# comment\n{}{}", block("CERTIFICATE"), block("CERTIFICATE"));
        assert_eq!(certificates_only(two.as_bytes()).unwrap(), vec![vec![1, 2, 3], vec![1, 2, 3]]);
        for tag in ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"] {
            let text = format!("{}{}", block("CERTIFICATE"), block(tag));
            let e = certificates_only(text.as_bytes()).unwrap_err();
            assert_eq!(e, format!("holds a private key ({tag}): a CA bundle must hold certificates only"));
        }
        let e = certificates_only(format!("{}{}", block("CERTIFICATE"), block("PUBLIC KEY")).as_bytes()).unwrap_err();
        assert!(e.starts_with("holds a PUBLIC KEY block"), "{e}");
        assert_eq!(certificates_only(b"nothing here").unwrap_err(), "holds no PEM certificate");
    }

    #[test]
    fn the_git_ca_file_holds_the_system_certificates_and_the_bundle_and_goes_away() {
        let extra = vec![vec![1, 2, 3]];
        let file = GitCaFile::write(&extra).unwrap();
        let path = file.path().to_path_buf();
        let certs = certificates_only(&std::fs::read(&path).unwrap()).unwrap();
        let system = rustls_native_certs::load_native_certs().certs.len();
        assert!(system > 10, "Debian's store is readable");
        assert_eq!(certs.len(), system + 1);
        assert_eq!(certs.last().unwrap(), &extra[0]);
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn the_system_bundle_passes() {
        let path = "/etc/ssl/certs/ca-certificates.crt";
        let bytes = std::fs::read(path).expect("Debian's ca-certificates bundle");
        assert!(certificates_only(&bytes).unwrap().len() > 10);
    }
}
