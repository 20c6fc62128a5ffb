//! Stand-in bastion artifacts (kubectl, helm, yq, the kubernetes.core collection) served from
//! `file://` URLs, and a pins file whose bastion rows point at them: no registry or release host
//! is reachable from the tests.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const YQ: &str = concat!(
    "#!/opt/eas/venv/bin/python3\n",
    "import json, sys, yaml\n",
    "if '--version' in sys.argv:\n",
    "    print('yq stand-in v4.54.1')\n",
    "    sys.exit(0)\n",
    "with open(sys.argv[-1]) as f:\n",
    "    print(json.dumps(yaml.safe_load(f)))\n",
);

pub fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Stand-ins for kubectl, helm, yq and the kubernetes.core collection, and a pins file whose
/// bastion rows point at them; the Python rows stay those of the real pins (the lock's).
pub fn write_pins(dir: &Path, nonce: &str, out: &Path) -> PathBuf {
    let served = dir.join("served");
    let kubectl = format!("#!/bin/sh\necho \"kubectl stand-in v1.37.2 {nonce}\"\n");
    std::fs::write(served.join("kubectl"), kubectl).unwrap();
    // yq as the installer files call it (`yq -o=json '.' FILE`, `yq e -o=json '.' FILE`: the
    // YAML as JSON, for jq), with the venv's PyYAML; `--version` as before.
    std::fs::write(served.join("yq"), YQ).unwrap();
    std::fs::write(
        served.join("helm.tar.gz"),
        targz(&[("linux-amd64/helm", b"#!/bin/sh\necho helm stand-in\n", 0o755)]),
    )
    .unwrap();
    std::fs::write(served.join("kubernetes-core-6.3.0.tar.gz"), collection("6.3.0")).unwrap();

    let real = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("pins.json")).unwrap();
    let mut pins: serde_json::Value = serde_json::from_str(&real).unwrap();
    for row in pins["pins"].as_array_mut().unwrap() {
        if row["profile"] != "bastion" || row["url"].is_null() {
            continue;
        }
        let file = match row["name"].as_str().unwrap() {
            "kubectl" => "kubectl",
            "helm" => "helm.tar.gz",
            "yq" => "yq",
            "kubernetes.core" => "kubernetes-core-6.3.0.tar.gz",
            other => panic!("unexpected artifact row {other}"),
        };
        let path = served.join(file);
        row["url"] = format!("file://{}", path.display()).into();
        row["sha256"] = sha256(&std::fs::read(&path).unwrap()).into();
    }
    std::fs::write(out, serde_json::to_string_pretty(&pins).unwrap()).unwrap();
    out.to_path_buf()
}

pub fn targz(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    for (name, body, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(*mode);
        b.append_data(&mut h, name, *body).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A minimal collection tarball `ansible-galaxy collection install` accepts: MANIFEST.json,
/// FILES.json with the checksum of every file, and one file.
pub fn collection(version: &str) -> Vec<u8> {
    let readme = b"stand-in kubernetes.core for eas tests\n";
    let files = serde_json::json!({"format": 1, "files": [
        {"name": ".", "ftype": "dir", "chksum_type": null, "chksum_sha256": null, "format": 1},
        {"name": "README.md", "ftype": "file", "chksum_type": "sha256", "chksum_sha256": sha256(readme), "format": 1}
    ]});
    let files = serde_json::to_vec(&files).unwrap();
    let manifest = serde_json::json!({"format": 1,
        "collection_info": {"namespace": "kubernetes", "name": "core", "version": version,
            "authors": ["eas tests"], "readme": "README.md", "tags": [], "description": "eas test stand-in",
            "license": ["GPL-3.0-or-later"], "license_file": null, "dependencies": {}, "repository": null,
            "documentation": null, "homepage": null, "issues": null},
        "file_manifest_file": {"name": "FILES.json", "ftype": "file", "chksum_type": "sha256",
            "chksum_sha256": sha256(&files), "format": 1}});
    let manifest = serde_json::to_vec(&manifest).unwrap();
    targz(&[("MANIFEST.json", &manifest, 0o644), ("FILES.json", &files, 0o644), ("README.md", readme, 0o644)])
}
