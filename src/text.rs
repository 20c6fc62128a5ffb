//! Text meant for people: control characters and ANSI escapes made visible, and credentials in
//! URLs (`scheme://user:pass@host`) masked. Values read from the cluster, the environment or files
//! pass through here before they reach a terminal, so they cannot forge extra lines, recolour the
//! screen, or show a proxy password.

/// Escapes every control character (C0, DEL, C1) except none: a newline inside a value would
/// forge a line of its own, so it is shown as `\n` too. Printable text, including non-ASCII
/// letters, stays as it is.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Replaces the user information of every URL in `s` (`http://user:pass@proxy:3128` becomes
/// `http://***@proxy:3128`). Text without `://` is returned unchanged.
pub fn mask_userinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>') || c.is_whitespace());
        let authority = &tail[..end.unwrap_or(tail.len())];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("***");
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// One line for a person: every secret eas knows masked (`crate::secrets`), URL credentials
/// masked, then control characters escaped.
pub fn for_people(s: &str) -> String {
    escape_controls(&mask_userinfo(&crate::secrets::mask(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_ansi_are_made_visible() {
        let cases = [
            ("node-1", "node-1"),
            ("gpu-ñ-1", "gpu-ñ-1"),
            ("a\nb", "a\\nb"),
            ("\u{1b}[31mred\u{1b}[0m", "\\u{1b}[31mred\\u{1b}[0m"),
            ("tab\there", "tab\\there"),
            ("cr\r", "cr\\r"),
            ("c1\u{9b}31m", "c1\\u{9b}31m"),
            ("del\u{7f}", "del\\u{7f}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape_controls(raw), shown, "{raw:?}");
        }
    }

    #[test]
    fn userinfo_is_masked_wherever_a_url_appears() {
        let cases = [
            ("http://u:PASS@p:3128", "http://***@p:3128"),
            ("proxy http://u:PASS@p:3128/x is down", "proxy http://***@p:3128/x is down"),
            ("\"https://tok@h\" and socks5://a:b@c:1", "\"https://***@h\" and socks5://***@c:1"),
            ("http://p:3128", "http://p:3128"),
            ("http://h/path@not-userinfo", "http://h/path@not-userinfo"),
            ("user:pass@host without scheme", "user:pass@host without scheme"),
            ("http://a:p@ss@h", "http://***@h"),
            ("", ""),
        ];
        for (raw, shown) in cases {
            assert_eq!(mask_userinfo(raw), shown, "{raw:?}");
        }
    }
}
