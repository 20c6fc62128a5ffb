//! The secrets the sentinel tests plant, one in each place a secret can come from
//! (tests/it/hardening.rs: the commands that read the cluster; tests/it/sentinel.rs: a real run),
//! and the forms in which any of them would show that it leaked. None may appear in an output,
//! a log, a state file or a work tree. (`S_`: a sentinel, where a test's own names mix with them.)

/// The kubeconfig's bearer token (the server's), also an exec credential plugin's output.
pub const S_TOKEN: &str = "SNTLkubeTOKEN7f3a9c2d";
/// A second user's static token (a context the run does not use).
pub const S_STATIC: &str = "SNTLstaticTOKEN4e5f6a";
/// That user's password.
pub const S_PASSWORD: &str = "SNTLkubePASSWORD4e1b";
/// A line of an embedded client key (base64 of an EC key's DER, as such a line reads).
pub const S_KEY_LINE: &str = "MHcCAQEEISNTLclientKEYbody0123456789abcdefABCDEFghij";
/// The environment an exec credential plugin is given.
pub const S_PLUGIN_ENV: &str = "SNTLpluginENV9d8c";
/// `HF_TOKEN` (Hugging Face's `hf_` prefix, which redaction must not rely on alone).
pub const S_HF: &str = "hf_SNTLhuggingFACE0123456789abcd";
/// The admin password the bastion passes on as a secret.
pub const S_ADMIN: &str = "SNTLadminPASSWORD77aa";
/// A proxy URL's password.
pub const S_PROXY: &str = "SNTLproxyPASS31";

/// Every sentinel as a leak would show it: as planted, and the token as it reads inside base64
/// (its whole 3-byte groups).
pub fn forms() -> Vec<String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&S_TOKEN.as_bytes()[..S_TOKEN.len() / 3 * 3]);
    [S_TOKEN, S_STATIC, S_PASSWORD, S_KEY_LINE, S_PLUGIN_ENV, S_HF, S_ADMIN, S_PROXY]
        .iter()
        .map(|s| s.to_string())
        .chain([b64])
        .collect()
}
