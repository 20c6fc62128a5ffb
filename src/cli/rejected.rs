//! A command line clap rejected: when it asked for `--output json`, the document it named is
//! still printed, as an error document (exit 2). The CLI layer reads clap's rendering here.

use crate::document::{DOCUMENTS, schema_of};

/// For a command line clap rejected: the schema of the document it asked for with
/// `--output json` (`--output=json` too), if it names a command that prints one. The command is
/// the first word that names one; `pins` needs `show` after it.
pub fn schema_for_argv(args: &[String]) -> Option<&'static str> {
    let json =
        args.windows(2).any(|w| w[0] == "--output" && w[1] == "json") || args.iter().any(|a| a == "--output=json");
    if !json {
        return None;
    }
    let words: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let at = words.iter().position(|w| DOCUMENTS.iter().any(|(c, _)| c.split(' ').next() == Some(*w)))?;
    match words[at] {
        "pins" if words.get(at + 1) == Some(&"show") => schema_of("pins show"),
        "pins" => None,
        w => schema_of(w),
    }
}

/// Clap's rendered error as one line: its text up to the usage, without the `error:` prefix
/// (a required flag it names sits on the next line).
pub fn clap_cause(rendered: &str) -> String {
    let lines: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = lines.join(" ");
    text.strip_prefix("error: ").unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::next_command::argv;

    #[test]
    fn a_rejected_command_line_asking_for_json_names_its_document() {
        let cases = [
            ("eas up --dry-run --output json --bogus", Some("eas-plan/v1")),
            ("eas --context x status --output=json --nope", Some("eas-status/v1")),
            ("eas pins show --output json --x", Some("eas-pins/v1")),
            ("eas pins check --output json", None),
            ("eas up --dry-run --bogus", None),
            ("eas down --output json", None),
            ("eas --kubeconfig k verify --output json --timeout x", Some("eas-verify/v1")),
        ];
        for (line, want) in cases {
            assert_eq!(schema_for_argv(&argv(line)), want, "{line}");
        }
    }

    #[test]
    fn clap_s_error_becomes_one_line_naming_the_flag() {
        let rendered = "error: the following required arguments were not provided:\n  --dry-run\n\nUsage: eas up --dry-run\n\nFor more information, try '--help'.\n";
        assert_eq!(clap_cause(rendered), "the following required arguments were not provided: --dry-run");
    }
}
