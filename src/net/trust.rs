//! What a `--ca-bundle` may hold: certificates, nothing else. A private key in a bundle would be
//! built into the bastion image and merged into its system trust store, readable by anyone who
//! pulls the image, so a bundle with any other PEM block is bad input (exit 2).

/// The DER certificates of a PEM bundle, or why it is not a bundle of whole certificates.
pub fn certificates_only(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let blocks = pem::parse_many(bytes).map_err(|e| format!("is not PEM: {e}"))?;
    // The PEM parser skips a block without its END line: a bundle cut off mid-certificate.
    let begun = bytes.windows(11).filter(|w| w == b"-----BEGIN ").count();
    if begun > blocks.len() {
        return Err(format!("is cut off: block {} has no END line", blocks.len() + 1));
    }
    let mut certs = Vec::new();
    for (i, b) in blocks.into_iter().enumerate() {
        match b.tag() {
            "CERTIFICATE" => {
                let der = b.into_contents();
                if !is_certificate_der(&der) {
                    return Err(format!("certificate {} is not a whole X.509 certificate (DER)", i + 1));
                }
                certs.push(der);
            }
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

/// Whether `der` is shaped as an X.509 certificate (RFC 5280 §4.1): one SEQUENCE of exactly a
/// SEQUENCE (tbsCertificate), a SEQUENCE (signatureAlgorithm) and a BIT STRING (signatureValue),
/// every length consistent. A truncated or padded body fails; the signature is the TLS stack's.
pub fn is_certificate_der(der: &[u8]) -> bool {
    fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n].iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }
    let Some((0x30, body, [])) = tlv(der) else { return false };
    let Some((0x30, _, rest)) = tlv(body) else { return false };
    let Some((0x30, _, rest)) = tlv(rest) else { return false };
    matches!(tlv(rest), Some((0x03, _, [])))
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

    /// A real certificate: the first of Debian's bundle.
    fn cert_der() -> Vec<u8> {
        let bytes = std::fs::read("/etc/ssl/certs/ca-certificates.crt").expect("Debian's ca-certificates bundle");
        pem::parse_many(&bytes).unwrap().into_iter().find(|p| p.tag() == "CERTIFICATE").unwrap().into_contents()
    }

    fn block(tag: &str) -> String {
        if tag == "CERTIFICATE" {
            return pem::encode(&pem::Pem::new(tag, cert_der()));
        }
        format!("-----BEGIN {tag}-----\nAQID\n-----END {tag}-----\n")
    }

    #[test]
    fn only_whole_certificates_pass() {
        let two = format!("# comment\n{}{}", block("CERTIFICATE"), block("CERTIFICATE"));
        assert_eq!(certificates_only(two.as_bytes()).unwrap(), vec![cert_der(), cert_der()]);
        // Cut off mid-certificate: the last block has no END line.
        let whole = block("CERTIFICATE");
        let cut = format!("{whole}{}", &whole[..whole.len() / 2]);
        assert_eq!(certificates_only(cut.as_bytes()).unwrap_err(), "is cut off: block 2 has no END line");
        // Whole PEM, but not a whole certificate inside: a truncated or a padded DER.
        let der = cert_der();
        for bad in [der[..der.len() - 10].to_vec(), [der.as_slice(), &[0, 0]].concat(), vec![1, 2, 3]] {
            let text = format!("{whole}{}", pem::encode(&pem::Pem::new("CERTIFICATE", bad)));
            let e = certificates_only(text.as_bytes()).unwrap_err();
            assert_eq!(e, "certificate 2 is not a whole X.509 certificate (DER)");
        }
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
        let extra = vec![cert_der()];
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
