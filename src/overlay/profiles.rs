//! A way forward when the overlay STOPs at the chosen pins profile: the other tree profiles whose
//! overlay decides fully (no STOP) on this cluster, and the command that uses one.
//!
//! Each profile's EAS commit is looked up in the mirror the trees phase already fetched (a
//! mirror holds every branch and tag, so the other profiles' commits are usually there), checked
//! out into a scratch work tree and decided with the same generated choices. Nothing is fetched.

use std::path::Path;
use std::time::Duration;

use crate::overlay::Generated;
use crate::pins::Pins;
use crate::trees::{self, Resolved};

/// One profile the overlay was tried at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    pub profile: String,
    /// `ref at sha`, or why it could not be tried.
    pub at: String,
    pub decides_fully: bool,
}

/// Decides the overlay at every tree profile but `current`, in the pins' order.
pub fn try_profiles(pins: &Pins, current: &str, mirror: &Path, generated: Option<&Generated>) -> Vec<Tried> {
    let mut out = Vec::new();
    for profile in pins.profiles() {
        if profile == current {
            continue;
        }
        let Some(row) = pins.row(profile, "eas") else { continue };
        let Some(prefix) = &row.sha else { continue };
        let spec = format!("{prefix}^{{commit}}");
        let sha = match trees::git(Some(mirror), &["rev-parse", "--verify", "--quiet", &spec], Duration::from_secs(60))
        {
            Ok(s) => s,
            Err(_) => {
                out.push(Tried {
                    profile: profile.to_string(),
                    at: format!("{prefix} is not in {}", mirror.display()),
                    decides_fully: false,
                });
                continue;
            }
        };
        let at = format!("EAS {} at {}", row.git_ref, &sha[..12.min(sha.len())]);
        let decides_fully = decide_at(mirror, &sha, generated).unwrap_or(false);
        out.push(Tried { profile: profile.to_string(), at, decides_fully });
    }
    out
}

fn decide_at(mirror: &Path, sha: &str, generated: Option<&Generated>) -> Option<bool> {
    let scratch = tempfile::Builder::new().prefix("eas-profile-").tempdir().ok()?;
    let dir = scratch.path().join("eas");
    let res = Resolved { objects: mirror.to_path_buf(), sha: sha.to_string() };
    trees::work_tree(&res, &dir, None).ok()?;
    let plan = crate::overlay::decide(&dir, sha, generated).ok()?;
    Some(plan.stops().next().is_none())
}

/// The lines added to a STOP: the profiles to use instead, with the command, or that none helps.
/// `command` renders the `eas up` command line for a profile.
pub fn lines(tried: &[Tried], command: &dyn Fn(&str) -> String) -> Vec<String> {
    let good: Vec<&Tried> = tried.iter().filter(|t| t.decides_fully).collect();
    if good.is_empty() {
        let names: Vec<String> = tried.iter().map(|t| format!("{} ({})", t.profile, t.at)).collect();
        let tried = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return vec![format!(
            "no other pins profile's overlay decides fully here (tried: {tried}); regenerate the patch as named above"
        )];
    }
    good.iter()
        .map(|t| {
            format!("the overlay decides fully at pins profile {} ({}): `{}`", t.profile, t.at, command(&t.profile))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn pins(main: &str, rc: &str) -> Pins {
        let row = |profile: &str, sha: &str| {
            serde_json::json!({"profile": profile, "name": "eas", "repo": "intel/enterprise-ai-solutions",
                "ref": if profile == "main" { "main" } else { "v1.2.0-rc.1" }, "sha": sha, "locked": false,
                "date": "d", "source": "s"})
        };
        let mut rows = vec![row("main", main), row("v1.2.0-rc.1", rc)];
        for p in ["main", "v1.2.0-rc.1"] {
            for n in ["ei", "eat"] {
                rows.push(serde_json::json!({"profile": p, "name": n, "repo": "o/r", "ref": "main", "sha": "abcdef1",
                    "locked": false, "date": "d", "source": "s"}));
            }
        }
        Pins::parse(&serde_json::json!({"schema": "eas-pins/v1", "pins": rows}).to_string()).unwrap()
    }

    /// The synthetic EAS tree (release-1.2 layout) tagged as the rc, then main moves the EnvoyProxy
    /// task out of install.yaml, as PR #251 reports for 97f6157: 0006 STOPs at main only.
    #[test]
    fn a_stop_at_main_names_the_rc_profile_and_its_command() {
        let (tmp, up) = crate::testing::temp_path("up");
        let synthetic = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/synthetic/eas");
        assert!(Command::new("cp").arg("-R").arg(synthetic).arg(&up).status().unwrap().success());
        git(&up, &["init", "-q", "-b", "main"]);
        git(&up, &["add", "-A"]);
        git(&up, &["commit", "-qm", "release-1.2 layout"]);
        let rc = git(&up, &["rev-parse", "HEAD"]);
        git(&up, &["tag", "v1.2.0-rc.1"]);
        std::fs::write(
            up.join("roles/envoy_gateway/tasks/install.yaml"),
            "---\n- ansible.builtin.include_tasks: proxy.yaml\n",
        )
        .unwrap();
        git(&up, &["commit", "-qam", "move the EnvoyProxy task"]);
        let main = git(&up, &["rev-parse", "HEAD"]);
        let mirror = tmp.path().join("mirror.git");
        git(tmp.path(), &["clone", "-q", "--mirror", up.to_str().unwrap(), mirror.to_str().unwrap()]);
        let pins = pins(&main[..7], &rc[..7]);

        // The STOP itself is real at main.
        let wt = tmp.path().join("wt");
        trees::work_tree(&Resolved { objects: mirror.clone(), sha: main.clone() }, &wt, None).unwrap();
        assert!(crate::overlay::decide(&wt, &main, None).unwrap().stops().next().is_some());

        let tried = try_profiles(&pins, "main", &mirror, None);
        assert_eq!(tried.len(), 1);
        assert!(tried[0].decides_fully, "{tried:?}");
        let cmd = |p: &str| format!("eas up --profile {p}");
        let l = lines(&tried, &cmd);
        assert_eq!(l.len(), 1);
        assert!(l[0].contains("pins profile v1.2.0-rc.1") && l[0].contains(&rc[..12]), "{l:?}");
        assert!(l[0].ends_with("`eas up --profile v1.2.0-rc.1`"), "{l:?}");

        // From the rc, main is tried and STOPs too: no way forward but regenerating.
        let tried = try_profiles(&pins, "v1.2.0-rc.1", &mirror, None);
        assert!(!tried[0].decides_fully);
        assert!(lines(&tried, &cmd)[0].starts_with("no other pins profile's overlay decides fully here (tried: main"));
    }
}
