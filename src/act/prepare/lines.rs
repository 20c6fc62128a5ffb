//! Block-style YAML read line by line, so an edit can replace or insert single lines and leave
//! every comment, blank line and quoting choice of the file as it was. Upstream files are never
//! re-serialised: a serialiser would drop the comments that tell users what each key does.
//!
//! This is not a YAML parser. It recognises the few shapes the edits need (a `key: value` line,
//! a `- ` item line, comments, block scalars); callers check every edited text with a real
//! parser afterwards.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Blank,
    Comment,
    Content,
    /// A line inside a `|` or `>` block scalar: text, even when it starts with `#`.
    ScalarBody,
    /// `---` or `...` at column 0.
    DocMarker,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub text: String,
    pub indent: usize,
    pub kind: Kind,
}

impl Line {
    pub fn is_content(&self) -> bool {
        self.kind == Kind::Content
    }
}

/// Splits a text into classified lines (without their line breaks).
pub fn scan(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    // The column of the key or dash that owns an open block scalar.
    let mut scalar_owner: Option<usize> = None;
    for raw in text.lines() {
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let rest = &raw[indent..];
        if let Some(owner) = scalar_owner {
            if rest.trim().is_empty() || indent > owner {
                out.push(Line { text: raw.to_string(), indent, kind: Kind::ScalarBody });
                continue;
            }
            scalar_owner = None;
        }
        let kind = if rest.trim().is_empty() {
            Kind::Blank
        } else if rest.starts_with('#') {
            Kind::Comment
        } else if indent == 0 && (is_marker(rest, "---") || is_marker(rest, "...")) {
            Kind::DocMarker
        } else {
            Kind::Content
        };
        if kind == Kind::Content {
            scalar_owner = block_scalar_owner(raw, indent);
        }
        out.push(Line { text: raw.to_string(), indent, kind });
    }
    out
}

fn is_marker(rest: &str, marker: &str) -> bool {
    rest.strip_prefix(marker).is_some_and(|after| after.is_empty() || after.starts_with([' ', '\t']))
}

/// When a content line opens a block scalar (`key: |`, `- >-`), the column of its owner.
fn block_scalar_owner(line: &str, indent: usize) -> Option<usize> {
    let mut col = indent;
    let mut owner = indent;
    let mut rest = &line[indent..];
    while let Some(after) = dash_item(rest) {
        owner = col;
        col += rest.len() - after.len();
        rest = after;
    }
    let value = match key_value(rest) {
        Some(kv) => {
            owner = col;
            kv.value
        }
        None => split_comment(rest).0.trim(),
    };
    let opens = value.starts_with('|') || value.starts_with('>');
    opens.then_some(owner)
}

/// The text after a `- ` sequence indicator (and its spaces), or None when `rest` is no item.
pub fn dash_item(rest: &str) -> Option<&str> {
    let after = rest.strip_prefix('-')?;
    if after.is_empty() {
        return Some(after);
    }
    if after.starts_with(' ') {
        return Some(after.trim_start_matches(' '));
    }
    None
}

/// A `key: value  # comment` line, split. Offsets are into the text it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyValue<'a> {
    /// The key, unquoted.
    pub key: String,
    /// The value without its comment, trimmed (empty for a key that opens a block).
    pub value: &'a str,
    /// Where the text after the `:` starts.
    pub after_colon: usize,
    /// The whitespace before the comment and the comment itself, or "" without one.
    pub comment: &'a str,
}

/// Reads `key: value` at the start of `rest`. Keys may be plain or quoted.
pub fn key_value(rest: &str) -> Option<KeyValue<'_>> {
    let (key, key_end) = if rest.starts_with('"') || rest.starts_with('\'') {
        let end = quoted_end(rest)?;
        (unquote(&rest[..end]), end)
    } else {
        let bytes = rest.as_bytes();
        let mut i = 0;
        loop {
            if i >= bytes.len() {
                return None;
            }
            if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
                break;
            }
            if bytes[i] == b'#' && i > 0 && bytes[i - 1] == b' ' {
                return None;
            }
            i += 1;
        }
        let key = rest[..i].trim_end();
        if key.is_empty() || key.starts_with(['-', '[', '{', '#', '&', '*', '!', '|', '>']) {
            return None;
        }
        (key.to_string(), i)
    };
    let after = &rest[key_end..];
    let after = after.strip_prefix(':')?;
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    let after_colon = key_end + 1;
    let (value, comment) = split_comment(after);
    Some(KeyValue { key, value: value.trim(), after_colon, comment })
}

/// Splits trailing `  # comment` (with the whitespace before it) from a value.
/// A `#` starts a comment only after whitespace and outside quotes.
pub fn split_comment(s: &str) -> (&str, &str) {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut token_start = true;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'"' | b'\'' if token_start => {
                let end = quoted_end(&s[i..]).map(|e| i + e).unwrap_or(bytes.len());
                i = end;
                token_start = false;
                continue;
            }
            b'#' if i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t' => {
                let mut start = i;
                while start > 0 && (bytes[start - 1] == b' ' || bytes[start - 1] == b'\t') {
                    start -= 1;
                }
                return (&s[..start], &s[start..]);
            }
            b' ' | b'\t' | b'[' | b'{' | b',' => token_start = true,
            _ => token_start = false,
        }
        i += 1;
    }
    (s, "")
}

/// The byte length of the quoted scalar at the start of `s` (including its quotes).
fn quoted_end(s: &str) -> Option<usize> {
    let q = s.as_bytes()[0];
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        if q == b'"' && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == q {
            if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// A scalar's text without its quotes (JSON escapes, a subset of YAML's, for double quotes).
pub fn unquote(s: &str) -> String {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        return serde_json::from_str::<String>(s).unwrap_or_else(|_| s[1..s.len() - 1].to_string());
    }
    if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        return s[1..s.len() - 1].replace("''", "'");
    }
    s.to_string()
}

/// Rebuilds `line` (whose key starts at column `col`) with a new value, keeping its comment.
pub fn with_value(line: &str, col: usize, kv: &KeyValue<'_>, value: &str) -> String {
    let head = &line[..col + kv.after_colon];
    if kv.comment.is_empty() {
        return format!("{head} {value}");
    }
    let comment = kv.comment.trim_start();
    let gap = &kv.comment[..kv.comment.len() - comment.len()];
    let gap = if kv.value.is_empty() { "  " } else { gap };
    format!("{head} {value}{gap}{comment}")
}

/// Where a value cannot be edited as a single line, why (flow collections, block scalars,
/// anchors, aliases and tags).
pub fn uneditable(value: &str) -> Option<&'static str> {
    match value.chars().next() {
        Some('{') | Some('[') => Some("a flow-style collection"),
        Some('|') | Some('>') => Some("a block scalar"),
        Some('&') => Some("an anchor (other entries may alias it)"),
        Some('*') => Some("an alias of another node"),
        Some('!') => Some("a tagged node"),
        _ => None,
    }
}

/// The index of the first line after `start` whose indent is at most `indent` (a sibling or
/// parent), ignoring blanks and comments; `lines.len()` if none.
pub fn block_end(lines: &[Line], start: usize, indent: usize) -> usize {
    (start + 1..lines.len())
        .find(|&i| matches!(lines[i].kind, Kind::Content | Kind::DocMarker) && lines[i].indent <= indent)
        .unwrap_or(lines.len())
}

/// The index just after the last content (or non-blank block-scalar) line in `lines[from..to]`,
/// or `from`.
pub fn content_end(lines: &[Line], from: usize, to: usize) -> usize {
    let filled = |l: &Line| l.kind == Kind::Content || (l.kind == Kind::ScalarBody && !l.text.trim().is_empty());
    (from..to).rev().find(|&i| filled(&lines[i])).map_or(from, |i| i + 1)
}

/// The first line (1-based) that holds a tab outside a comment, if any: tabs are not YAML
/// indentation, and columns computed from them would be wrong.
pub fn first_tab(lines: &[Line]) -> Option<usize> {
    lines.iter().position(|l| l.kind != Kind::Comment && split_comment(&l.text).0.contains('\t')).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_lines() {
        // (text, key, value, comment)
        let cases = [
            ("a: 1", Some(("a", "1", ""))),
            ("a:", Some(("a", "", ""))),
            ("a:   # note", Some(("a", "", "   # note"))),
            ("name: \"x # y\"  # real", Some(("name", "\"x # y\"", "  # real"))),
            ("k: 'it''s' # c", Some(("k", "'it''s'", " # c"))),
            ("url: http://h:80/x#frag", Some(("url", "http://h:80/x#frag", ""))),
            ("\"QUOTED\": v", Some(("QUOTED", "v", ""))),
            ("a:b", None),
            ("- item", None),
            ("just text", None),
            ("# a: 1", None),
        ];
        for (text, want) in cases {
            let got = key_value(text).map(|kv| (kv.key, kv.value.to_string(), kv.comment.to_string()));
            let want = want.map(|(k, v, c)| (k.to_string(), v.to_string(), c.to_string()));
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn values_are_replaced_with_their_comment_kept() {
        let cases = [
            ("  x: 1", 2, "2", "  x: 2"),
            ("  x: 1  # why", 2, "2", "  x: 2  # why"),
            ("x:   # why", 0, "\"v\"", "x: \"v\"  # why"),
            ("x: \"\"  # BYO cluster: path", 0, "\"/k\"", "x: \"/k\"  # BYO cluster: path"),
        ];
        for (line, col, value, want) in cases {
            let kv = key_value(&line[col..]).unwrap();
            assert_eq!(with_value(line, col, &kv, value), want, "{line:?}");
        }
    }

    #[test]
    fn block_scalar_bodies_are_not_comments() {
        let text = "a: |\n  # text\n\n  more\nb: 1\n# comment\nc:\n  - >-\n    # folded\n  - d\n";
        let kinds: Vec<Kind> = scan(text).iter().map(|l| l.kind).collect();
        use Kind::*;
        assert_eq!(
            kinds,
            [Content, ScalarBody, ScalarBody, ScalarBody, Content, Comment, Content, Content, ScalarBody, Content]
        );
    }

    #[test]
    fn markers_tabs_and_shapes() {
        let lines = scan("---\na: 1\n# \tok in a comment\nb:\tc\n...\n");
        assert_eq!(lines[0].kind, Kind::DocMarker);
        assert_eq!(lines[4].kind, Kind::DocMarker);
        assert_eq!(first_tab(&lines), Some(4));
        assert_eq!(uneditable("{a: 1}"), Some("a flow-style collection"));
        assert_eq!(uneditable("*common"), Some("an alias of another node"));
        assert_eq!(uneditable("\"x\""), None);
        assert_eq!(dash_item("- a: 1"), Some("a: 1"));
        assert_eq!(dash_item("-"), Some(""));
        assert_eq!(dash_item("--flag"), None);
        assert_eq!(unquote("\"a\\\"b\""), "a\"b");
        assert_eq!(unquote("plain"), "plain");
    }

    #[test]
    fn block_and_content_ends() {
        let lines = scan("a:\n  b: 1\n  # trailing\n\nc: 2\n");
        assert_eq!(block_end(&lines, 0, 0), 4);
        assert_eq!(content_end(&lines, 1, 4), 2);
        assert_eq!(block_end(&lines, 4, 0), 5);
    }
}
