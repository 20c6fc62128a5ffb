//! Text meant for people: control characters, ANSI escapes, bidi controls and zero-width
//! characters made visible, and credentials in URLs (`scheme://user:pass@host`) masked. Values
//! read from the cluster, the environment, files or subprocesses pass through here before they
//! reach a terminal or a text file, so they cannot forge extra lines, recolour the screen, reorder
//! what a reader sees (U+202E), hide in a name (U+200B), or show a proxy password. JSON documents
//! get the same characters as `\uXXXX` escapes ([`json_safe`]): the values read back unchanged.

/// Bidi controls (they reorder what follows on screen) and zero-width characters (they make two
/// names that differ look the same). Unicode's `Bidi_Control` set, and the zero-width format
/// characters with the byte-order mark.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}')
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

/// Escapes every control character (C0, DEL, C1), bidi control and zero-width character: a
/// newline inside a value would forge a line of its own, so it is shown as `\n` too. Printable
/// text, including non-ASCII letters, stays as it is.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A serialised JSON document with every bidi control and zero-width character written as a
/// `\uXXXX` escape: the same JSON values, and no raw reordering character in the file or on a
/// terminal. (serde_json already escapes control characters; these can only occur in strings.)
pub fn json_safe(json: String) -> String {
    if !json.chars().any(is_invisible) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_invisible(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Replaces the user information of every URL in `s` (`http://user:pass@proxy:3128` becomes
/// `http://***@proxy:3128`). Text without `://` is returned unchanged.
pub fn mask_userinfo(s: &str) -> String {
    crate::secrets::redact::userinfo(s, &mut 0)
}

/// `s` cut to at most `max` characters (never inside one), with `…` when something was cut.
pub fn ellipsis(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `s` padded with spaces to `width` characters (the `{:w$}` format counts at most 65,535 and
/// panics past it; this counts characters, whatever their number).
pub fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    let mut out = String::with_capacity(s.len() + width.saturating_sub(n));
    out.push_str(s);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
    out
}

/// Removes ANSI escape sequences: CSI (colours, cursor moves) up to its final byte, OSC (titles,
/// links) up to BEL or ST, any other escape with the character after it. The installer colours
/// its lines whether or not a terminal reads them, and the Docker daemon a build step's stderr.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                // OSC: up to BEL or ST.
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '\u{7}' || (c == '\u{1b}' && chars.peek() == Some(&'\\')) {
                        if c == '\u{1b}' {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            _ => {
                chars.next();
            }
        }
    }
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

    /// Each case's input through `f` gives the text beside it (a failure names the input).
    fn each_gives(f: fn(&str) -> String, cases: &[(&str, &str)]) {
        for (input, want) in cases {
            assert_eq!(f(input), *want, "{input:?}");
        }
    }

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
            ("gpu\u{202e}1-edon", "gpu\\u{202e}1-edon"),
            ("a\u{2066}b\u{2069}", "a\\u{2066}b\\u{2069}"),
            ("zero\u{200b}width\u{feff}", "zero\\u{200b}width\\u{feff}"),
            ("rtl\u{200f}", "rtl\\u{200f}"),
        ];
        each_gives(escape_controls, &cases);
    }

    #[test]
    fn json_keeps_its_values_and_loses_its_raw_bidi_and_zero_width_characters() {
        let name = "gpu\u{202e}1-edon\u{200b}";
        let json = json_safe(serde_json::to_string(&serde_json::json!({"name": name, "plain": "ñ"})).unwrap());
        assert_eq!(json, r#"{"name":"gpu\u202e1-edon\u200b","plain":"ñ"}"#);
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["name"], name);
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
            (
                "set HTTPS_PROXY to http://[user:password@]host:port",
                "set HTTPS_PROXY to http://[user:password@]host:port",
            ),
            ("http://u:p@[::1]:3128", "http://***@[::1]:3128"),
            ("", ""),
        ];
        each_gives(mask_userinfo, &cases);
    }

    #[test]
    fn ansi_codes_are_removed() {
        let cases = [
            ("\x1b[1;31mred\x1b[0m text", "red text"),
            ("\x1b]0;title\x07after", "after"),
            ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
            ("plain — dash", "plain — dash"),
        ];
        each_gives(strip_ansi, &cases);
    }
}
