//! `eas overlay` end to end: the real binary on synthetic git repositories built here.
//!
//! The repositories hold small files of our own that mimic EAS's layout and only the lines the
//! shipped patches read (never copies of upstream files), committed in the states the decider
//! must tell apart: pristine (the release-1.2 layout), the EnvoyProxy task moved (main-like),
//! upstream carrying a patch, upstream fixing a problem another way, and work trees that are
//! dirty or already patched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ISTIO: &str = "roles/istio/tasks/install.yaml";
const NRI: &str = "roles/nri_cpu_balloons/tasks/install_advanced.yaml";
const ENVOY: &str = "roles/envoy_gateway/tasks/install.yaml";
const PREFLIGHT: &str = "playbooks/includes/preflight.yaml";

const ISTIO_TASK: &str = r#"---
# synthetic: the Istio role's Helm install task, reduced to the lines overlay 0002 reads
- name: "istio | Install"
  block:
    - name: "istio | Install Helm chart"
      kubernetes.core.helm:
        name: "{{ istio_helm_release_name }}"
        release_namespace: "{{ istio_namespace }}"
        create_namespace: true
        values_files: "{{ [istio_helm_default_values_file] }}"
        dependency_update: true
        wait: "{{ helm_wait }}"
        timeout: "{{ istio_wait_timeout }}"
      register: helm_install_result
"#;

const NRI_WAIT: &str = r#"---
# synthetic: the balloons DaemonSet wait, reduced to the lines overlay 0003 reads
- name: "nri_cpu_balloons | Wait for DaemonSet readiness"
  kubernetes.core.k8s_info:
    kind: DaemonSet
  register: _nri_ds
  until:
    - _nri_ds.resources | length > 0
    - (_nri_ds.resources[0].status.numberReady | default(0) | int) >= 1
  retries: 30
  delay: 10

- name: "nri_cpu_balloons | next task"
  ansible.builtin.debug:
    msg: done
"#;

const ENVOY_TASK: &str = r#"---
# synthetic: the EnvoyProxy task, reduced to the lines overlay 0006 reads
- name: "envoy_gateway | Create EnvoyProxy config"
  kubernetes.core.k8s:
    definition:
      kind: EnvoyProxy
      spec:
        provider:
          kubernetes:
            envoyDaemonSet:
              pod:
                nodeSelector:
                  node-role.kubernetes.io/control-plane: ""
                tolerations:
                  - key: node-role.kubernetes.io/control-plane
                    operator: Exists
                    effect: NoSchedule
"#;

const PREFLIGHT_TEXT: &str = "---\n# synthetic preflight\n- ansible.builtin.set_fact:\n    \
                              nri_cpu_balloons_enabled: \"{{ kubernetes_cpu_policy == 'nri-balloons' }}\"\n";

fn eas() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_eas"));
    // A developer's own pins never reach a test: no EAS_PINS, no user pins file.
    let no_config = std::env::temp_dir().join("eas-test-no-config");
    c.env_remove("CI").env_remove("EAS_PINS").env("XDG_CONFIG_HOME", no_config);
    c.env("NO_COLOR", "1").arg("--progress").arg("plain");
    c
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A synthetic EAS clone: files committed as given, then each later commit's changes.
struct Repo {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Repo {
    fn new(files: &[(&str, &str)]) -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("eas");
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        let r = Repo { _tmp: tmp, dir };
        r.commit("synthetic EAS tree", files);
        r
    }

    /// The release-1.2 layout: every file each shipped patch reads, as written.
    fn release_1_2() -> Repo {
        Repo::new(&[(ISTIO, ISTIO_TASK), (NRI, NRI_WAIT), (ENVOY, ENVOY_TASK), (PREFLIGHT, PREFLIGHT_TEXT)])
    }

    fn commit(&self, msg: &str, files: &[(&str, &str)]) -> String {
        for (p, text) in files {
            self.write(p, text);
        }
        git(&self.dir, &["add", "-A"]);
        git(&self.dir, &["commit", "-q", "-m", msg]);
        self.head()
    }

    fn write(&self, p: &str, text: &str) {
        let path = self.dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.dir.join(p)).unwrap()
    }

    fn head(&self) -> String {
        git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// Every byte of the work tree, plus the clone's own index file.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                if rel == Path::new(".git") {
                    continue;
                }
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.dir, &self.dir, &mut out);
        out.insert(PathBuf::from(".git/index"), std::fs::read(self.dir.join(".git/index")).unwrap());
        out
    }

    fn overlay(&self, extra: &[&str]) -> Run {
        let mut c = eas();
        c.arg("overlay").arg("--repo").arg(&self.dir).args(extra);
        Run::from(c.output().unwrap())
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    /// The decision line for a row (stdout is one `fact -> choice [source]` line per row).
    fn line(&self, id: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no decision for {id} in:\n{}\n{}", self.stdout, self.stderr))
    }

    /// The choice of a row's decision line: what sits between `->` and `[`.
    fn choice(&self, id: &str) -> &str {
        let l = self.line(id);
        let after = l.split_once(" -> ").expect("fact -> choice").1;
        after.rsplit_once(" [").expect("[source]").0
    }
}

fn fixture_facts() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/config/desktop-i9/facts.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A facts file next to the repository, from the desktop fixture changed by `edit`.
fn facts_file(repo: &Repo, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut f = fixture_facts();
    edit(&mut f);
    let p = repo.dir.parent().unwrap().join(name);
    std::fs::write(&p, serde_json::to_string_pretty(&f).unwrap()).unwrap();
    p
}

#[test]
fn without_facts_every_row_is_needed_and_applies_to_the_release_1_2_layout() {
    let repo = Repo::release_1_2();
    let before = repo.snapshot();
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("no --facts: skip conditions are not evaluated"), "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 3, "{}", r.stdout);
    assert_eq!(r.choice("0002"), "apply 0002 variant istio-helm-task");
    assert_eq!(r.choice("0003"), "apply 0003 variant balloons-ds-wait");
    assert_eq!(r.choice("0006"), "apply 0006 variant release-1.2");
    for id in ["0002", "0003", "0006"] {
        assert!(r.line(id).contains("no facts: skip conditions not evaluated"), "{}", r.line(id));
    }
    // The source cites the pinned commit and the lines the check read (the envoy hunk starts
    // two lines into the synthetic file's nodeSelector block: `kubernetes:` is line 9).
    let short = &repo.head()[..7];
    assert!(
        r.line("0006").ends_with(&format!("[intel/enterprise-ai-solutions@{short} {ENVOY}:9-16]")),
        "{}",
        r.line("0006")
    );
    assert_eq!(repo.snapshot(), before, "deciding must not touch the work tree or the index");
}

#[test]
fn apply_writes_exactly_the_patches_and_a_second_apply_is_a_no_op() {
    let repo = Repo::release_1_2();
    let head = repo.head();
    let decided = repo.overlay(&[]);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("applied 3 patch(es)"), "{}", r.stderr);
    // Only the three patched files changed, HEAD did not move, nothing was staged.
    assert_eq!(git(&repo.dir, &["diff", "--name-only"]).lines().count(), 3);
    assert_eq!(git(&repo.dir, &["diff", "--cached", "--name-only"]), "");
    assert_eq!(repo.head(), head);
    assert!(repo.read(ENVOY).contains("operator: Exists\n                tolerations:"), "{}", repo.read(ENVOY));
    assert!(!repo.read(ENVOY).contains("control-plane: \"\""));
    assert!(repo.read(ISTIO).contains("'platform': istio_platform"));
    assert!(repo.read(NRI).contains("desiredNumberScheduled"));

    // Decisions are read from the commit, so applying does not change them.
    let again = repo.overlay(&[]);
    assert_eq!(again.stdout, decided.stdout);

    let once = repo.snapshot();
    let second = repo.overlay(&["--apply"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(second.stderr.contains("already applied"), "{}", second.stderr);
    assert_eq!(repo.snapshot(), once, "a second --apply must leave the same tree as one");
}

#[test]
fn stop_names_the_file_hunk_and_upstream_change_and_writes_nothing() {
    // Upstream moves the EnvoyProxy task out of its role, where 0006's row does not follow it
    // (its may_move_to is roles/envoy_gateway/**).
    let repo = Repo::release_1_2();
    let moved = repo.commit(
        "envoy_gateway: move the EnvoyProxy task to its own file",
        &[
            (ENVOY, "---\n- ansible.builtin.include_tasks: ../../gateway_proxy/tasks/proxy.yaml\n"),
            ("roles/gateway_proxy/tasks/proxy.yaml", ENVOY_TASK),
        ],
    );
    let before = repo.snapshot();
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    // The other rows would apply; with one STOP nothing is written.
    assert_eq!(r.choice("0002"), "apply 0002 variant istio-helm-task");
    assert_eq!(r.choice("0006"), format!("STOP: regenerate 0006 against {moved}"));
    assert!(r.line("0006").contains("not found in the 0 file(s) it may have moved to"), "{}", r.line("0006"));
    let stop: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("STOP:")).collect();
    let text = stop.join("\n");
    assert!(text.contains("0006 (Envoy data plane"), "{text}");
    assert!(text.contains(&format!("{ENVOY} hunk 1 (written against line 211) no longer applies")), "{text}");
    assert!(
        text.contains(&format!(
            "last upstream commit that changed it: {moved} \"envoy_gateway: move the EnvoyProxy task"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("regenerate 0006 against {moved}")), "{text}");
    assert!(text.contains("0006-envoy-cp-selector.release-1.2.patch"), "{text}");
    assert!(text.contains("nothing was written"), "{text}");
    assert_eq!(repo.snapshot(), before, "STOP must leave the tree byte-identical");
}

#[test]
fn stop_when_the_patched_file_is_gone_says_so() {
    let repo = Repo::release_1_2();
    git(&repo.dir, &["rm", "-q", NRI]);
    let gone = repo.commit("nri: drop the advanced install", &[]);
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("{NRI} is not in the tree")), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("last upstream commit that changed it: {gone}")), "{}", r.stderr);
    assert_eq!(r.choice("0003"), format!("STOP: regenerate 0003 against {gone}"));
}

#[test]
fn merged_when_upstream_already_carries_the_patch() {
    let repo = Repo::release_1_2();
    let patch = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches/0006-envoy-cp-selector.release-1.2.patch");
    git(&repo.dir, &["apply", patch.to_str().unwrap()]);
    repo.commit("envoy_gateway: select control-plane nodes with Exists", &[]);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.choice("0006"), "merged 0006 (nothing to apply)");
    assert!(r.line("0006").contains("reverse-applies"), "{}", r.line("0006"));
    assert!(r.stderr.contains("applied 2 patch(es)"), "{}", r.stderr);
    assert_eq!(git(&repo.dir, &["diff", "--name-only"]).lines().collect::<Vec<_>>(), [ISTIO, NRI]);
}

#[test]
fn fixed_when_upstream_sets_the_platform_from_the_same_knob_even_if_the_patch_would_apply() {
    // Inside the Helm task, after the lines the patch reads, so the patch would still apply.
    let (_repo, r) =
        overlay_with_platform("\"{{ istio_platform | default('') }}\"", "istio: platform from istio_platform");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.choice("0002").starts_with("fixed 0002 ("), "{}", r.line("0002"));
    assert!(
        r.line("0002").contains(&format!(
            "{ISTIO} sets values.global.platform from istio_platform and {ISTIO} reads istio_platform"
        )),
        "{}",
        r.line("0002")
    );
    // The probe's line is cited: `platform:` is line 16 of the changed file.
    assert!(r.line("0002").ends_with(&format!("{ISTIO}:16]")), "{}", r.line("0002"));
}

/// `eas overlay` at release 1.2 once a commit (`message`) has the Istio task set
/// `values.global.platform` to `value`: the repository and the run.
fn overlay_with_platform(value: &str, message: &str) -> (Repo, Run) {
    let repo = Repo::release_1_2();
    repo.commit(message, &[(ISTIO, &with_values(ISTIO_TASK, value))]);
    let r = repo.overlay(&[]);
    (repo, r)
}

/// The Istio task with `values: {global: {platform: VALUE}}` in its Helm module, after `timeout:`.
fn with_values(task: &str, value: &str) -> String {
    let at = "        timeout: \"{{ istio_wait_timeout }}\"\n";
    assert!(task.contains(at));
    task.replace(at, &format!("{at}        values:\n          global:\n            platform: {value}\n"))
}

/// The shape of the real `roles/istio/tasks/install.yaml` at cc887cb4 (read with the search
/// tools): the Helm install inside an `istio | Install` block, then PeerAuthentication tasks
/// outside it, each introduced by a comment. A future edit that puts the word "global" in such a
/// comment and a `when:` on `istio_platform` holds every word the old probe looked for, yet
/// nothing sets `global.platform`: 0002 must still apply.
#[test]
fn a_comment_and_a_when_naming_the_words_do_not_make_0002_fixed() {
    let repo = Repo::release_1_2();
    let decoy = format!(
        "{ISTIO_TASK}\n# synthetic: applied outside the block, mesh-wide (global) and reconciled each run\n\
         - name: \"istio | Mesh mTLS\"\n  kubernetes.core.k8s:\n    state: present\n\
         \x20 when: istio_platform | default('') | length == 0\n"
    );
    repo.commit("istio: a decoy", &[(ISTIO, &decoy)]);
    let text = repo.read(ISTIO);
    assert!(text.contains("global") && text.contains("platform") && text.contains("istio_platform"));
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.choice("0002"), "apply 0002 variant istio-helm-task", "{}", r.line("0002"));
    assert!(!r.line("0002").contains("probe matches"), "{}", r.line("0002"));
}

#[test]
fn not_fixed_when_upstream_reads_another_key_than_the_one_eas_writes() {
    let (_repo, r) = overlay_with_platform("\"{{ istio_cni_platform }}\"", "istio: platform from istio_cni_platform");
    assert_eq!(r.choice("0002"), "apply 0002 variant istio-helm-task", "{}", r.line("0002"));
    assert!(!r.line("0002").contains("fixed"), "{}", r.line("0002"));
}

#[test]
fn skip_follows_the_generated_choices_and_the_node_labels() {
    let repo = Repo::release_1_2();
    // The desktop fixture: k3d-gpu's CNI layout (istio_platform "k3d"), a k3s-addon balloons
    // policy (best-effort), a server labelled control-plane=true.
    let desktop = facts_file(&repo, "desktop.json", |_| {});
    let r = repo.overlay(&["--facts", desktop.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("no --facts"));
    assert_eq!(r.choice("0002"), "apply 0002 variant istio-helm-task");
    assert!(r.line("0002").starts_with("0002 needed (istio_platform \"k3d\")"), "{}", r.line("0002"));
    assert!(r.choice("0003").starts_with("skip 0003 (not needed:"), "{}", r.line("0003"));
    assert!(r.line("0003").contains("kubernetes_cpu_policy is \"best-effort\""), "{}", r.line("0003"));
    assert!(r.line("0003").ends_with("[eas config: kubernetes_cpu_policy]"));
    assert_eq!(r.choice("0006"), "apply 0006 variant release-1.2");

    // Istio's default CNI paths, no addon balloons policy, kubeadm-style control-plane label.
    let other = facts_file(&repo, "other.json", |f| {
        let node = &mut f["nodes"][0];
        node["containerd"]["cni_bin_dirs"] = serde_json::json!(["/opt/cni/bin"]);
        node["labels"]["node-role.kubernetes.io/control-plane"] = serde_json::json!("");
        f["daemonsets"].as_array_mut().unwrap().retain(|d| !d["name"].as_str().unwrap().contains("balloons"));
    });
    let r = repo.overlay(&["--facts", other.to_str().unwrap(), "--apply"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.choice("0002").starts_with("skip 0002"), "{}", r.line("0002"));
    assert!(r.line("0002").contains("istio_platform is not written (read as \"\")"), "{}", r.line("0002"));
    assert_eq!(r.choice("0003"), "apply 0003 variant balloons-ds-wait");
    assert!(r.line("0003").starts_with("0003 needed (kubernetes_cpu_policy \"nri-balloons\")"));
    assert!(r.choice("0006").starts_with("skip 0006"), "{}", r.line("0006"));
    assert!(r.line("0006").ends_with("[facts: nodes[].labels[node-role.kubernetes.io/control-plane]]"));
    // Skipped rows are not written.
    assert_eq!(git(&repo.dir, &["diff", "--name-only"]), NRI);
}

#[test]
fn a_cluster_the_generator_refuses_is_refused_here_too() {
    let repo = Repo::release_1_2();
    let refused = facts_file(&repo, "refused.json", |f| {
        f["nodes"][0]["containerd"]["cni_bin_dirs"] = serde_json::json!(["/nowhere"]);
    });
    let r = repo.overlay(&["--facts", refused.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("REFUSE: unknown CNI layout"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

#[test]
fn a_dirty_work_tree_is_refused_and_left_as_it_was() {
    let repo = Repo::release_1_2();
    repo.write(PREFLIGHT, "# edited by hand\n");
    let before = repo.snapshot();
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("has changes that are neither the pinned commit nor the overlay"), "{}", r.stderr);
    assert!(r.stderr.contains(PREFLIGHT), "{}", r.stderr);
    assert_eq!(repo.snapshot(), before);
    run_hint(&r.stderr);
    assert_eq!(repo.overlay(&["--apply"]).code, 0, "the hint restored the pinned tree");
    git(&repo.dir, &["reset", "-q", "--hard"]);

    // Decisions still come from the commit, whatever the work tree holds.
    repo.write(ENVOY, "broken\n");
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.choice("0006"), "apply 0006 variant release-1.2");

    // Staged changes are refused too, even when they are exactly the overlay.
    git(&repo.dir, &["checkout", "--", "."]);
    assert_eq!(repo.overlay(&["--apply"]).code, 0);
    git(&repo.dir, &["add", "-A"]);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // The hint works with staged changes too: after it the same command succeeds.
    run_hint(&r.stderr);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("applied"), "{}", r.stderr);
    git(&repo.dir, &["reset", "-q", "--hard"]);

    // A partly applied overlay is dirty too, not "already applied".
    git(&repo.dir, &["checkout", "--", "."]);
    let patch = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches/0002-istio-platform.patch");
    git(&repo.dir, &["apply", patch.to_str().unwrap()]);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains(ISTIO), "{}", r.stderr);
}

/// Runs the first command quoted in the `hint:` line, as a user pasting it would.
fn run_hint(stderr: &str) {
    let hint = stderr.lines().find(|l| l.starts_with("hint: ")).unwrap_or_else(|| panic!("no hint: {stderr}"));
    let cmd = hint.split('`').nth(1).unwrap_or_else(|| panic!("no command in {hint}"));
    assert!(cmd.starts_with("git -C "), "{hint}");
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn explain_prints_permalinks_at_the_full_sha() {
    let repo = Repo::release_1_2();
    let head = repo.head();
    let r = repo.overlay(&["--explain"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.line("0006")
            .ends_with(&format!("[https://github.com/intel/enterprise-ai-solutions/blob/{head}/{ENVOY}#L9-L16]")),
        "{}",
        r.line("0006")
    );
    // Each row's reason, with the permalinks it was read from.
    assert!(r.stderr.contains("0006 why: "), "{}", r.stderr);
    assert!(r.stderr.contains("https://github.com/k3s-io/k3s/blob/25c0b5fb9bb369842d8300e7afe9456eda50c912/"));
}

#[test]
fn variants_are_tried_in_order_and_the_first_that_applies_wins() {
    let repo = Repo::new(&[("conf/a.yaml", "one: 1\ntwo: 2\nthree: 3\n")]);
    let overlay = repo.dir.parent().unwrap().join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    let patch = |from: &str, to: &str| {
        format!("--- a/conf/a.yaml\n+++ b/conf/a.yaml\n@@ -1,3 +1,3 @@\n one: 1\n-{from}\n+{to}\n three: 3\n")
    };
    let write = |order: &[(&str, &str)]| {
        let variants: Vec<String> = order
            .iter()
            .map(|(name, file)| format!(r#"{{"name":"{name}","layout":"{name} layout","patch":"{file}"}}"#))
            .collect();
        let json = format!(
            r#"{{"schema":"eas-overlay/v1","about":"test","upstream":"test/upstream","rows":[{{"id":"0100","title":"two",
            "why":{{"fact":"f","sources":[]}},"files":["conf/a.yaml"],
            "written_against":"0123456789abcdef0123456789abcdef01234567","variants":[{}]}}]}}"#,
            variants.join(",")
        );
        std::fs::write(overlay.join("overlay.json"), json).unwrap();
    };
    std::fs::write(overlay.join("gone.patch"), patch("two: 22", "two: 222")).unwrap();
    std::fs::write(overlay.join("first.patch"), patch("two: 2", "two: first")).unwrap();
    std::fs::write(overlay.join("second.patch"), patch("two: 2", "two: second")).unwrap();
    let ov = overlay.to_str().unwrap();

    write(&[("old", "gone.patch"), ("new", "second.patch")]);
    let r = repo.overlay(&["--overlay", ov]);
    assert_eq!(r.choice("0100"), "apply 0100 variant new", "{}", r.stderr);

    write(&[("first", "first.patch"), ("second", "second.patch")]);
    let r = repo.overlay(&["--overlay", ov, "--apply"]);
    assert_eq!(r.choice("0100"), "apply 0100 variant first", "{}", r.stderr);
    assert_eq!(repo.read("conf/a.yaml"), "one: 1\ntwo: first\nthree: 3\n");

    git(&repo.dir, &["checkout", "--", "."]);
    write(&[("gone", "gone.patch")]);
    let r = repo.overlay(&["--overlay", ov]);
    assert_eq!(r.code, 4);
    assert!(r.stderr.contains("variant gone (gone layout"), "{}", r.stderr);
    assert!(r.line("0100").contains("[test/upstream@"), "{}", r.line("0100"));
}

#[test]
fn bad_input_is_exit_2_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = eas();
    let r = Run::from(c.args(["overlay", "--repo"]).arg(tmp.path()).output().unwrap());
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("is not a git work tree"), "{}", r.stderr);
    assert!(r.stderr.contains("hint: pass --repo the directory of an EAS git clone"), "{}", r.stderr);

    let repo = Repo::release_1_2();
    let sub = Run::from(eas().args(["overlay", "--repo"]).arg(repo.dir.join("roles")).output().unwrap());
    assert_eq!(sub.code, 2, "{}", sub.stderr);
    assert!(sub.stderr.contains("not its top level"), "{}", sub.stderr);

    let bad = repo.dir.parent().unwrap().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"eas-facts/v0\"}").unwrap();
    let r = repo.overlay(&["--facts", bad.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

#[test]
fn overlay_check_script_decides_each_branch_tip_and_pull_request() {
    // An "upstream" with main and release-1.2 at the release-1.2 layout, and a pull request
    // that moves the EnvoyProxy task; the operator's clone is made from it.
    let upstream = Repo::release_1_2();
    git(&upstream.dir, &["branch", "release-1.2"]);
    git(&upstream.dir, &["checkout", "-q", "-b", "pr"]);
    let pr =
        upstream.commit("move the EnvoyProxy task", &[(ENVOY, "---\n- ansible.builtin.include_tasks: proxy.yaml\n")]);
    git(&upstream.dir, &["update-ref", "refs/pull/7/head", &pr]);
    git(&upstream.dir, &["checkout", "-q", "main"]);
    let clone = upstream.dir.parent().unwrap().join("clone");
    git(upstream.dir.parent().unwrap(), &["clone", "-q", upstream.dir.to_str().unwrap(), clone.to_str().unwrap()]);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/overlay-check.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&clone)
        .arg("7")
        .env("EAS", env!("CARGO_BIN_EXE_eas"))
        .env("XDG_CONFIG_HOME", std::env::temp_dir().join("eas-test-no-config"))
        .env_remove("EAS_PINS")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let r = Run::from(out);
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    let main = git(&clone, &["rev-parse", "origin/main"]);
    assert!(r.stdout.contains(&format!("== main at {main}")), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("== release-1.2 at {main}")), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("== PR #7 at {pr}")), "{}", r.stdout);
    assert_eq!(r.stdout.matches("-> apply 0006 variant release-1.2").count(), 2, "{}", r.stdout);
    assert!(r.stdout.contains(&format!("-> STOP: regenerate 0006 against {pr}")), "{}", r.stdout);
    // The clone keeps no worktree and an untouched work tree.
    assert_eq!(git(&clone, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(&clone, &["status", "--porcelain"]), "");
}

#[test]
fn overlay_check_script_prints_each_pins_profile_as_a_decision_table() {
    // The rc tag at the release-1.2 layout; main moved the EnvoyProxy task (as at EAS main).
    let upstream = Repo::release_1_2();
    let rc = upstream.head();
    git(&upstream.dir, &["tag", "v1.2.0-rc.1"]);
    git(&upstream.dir, &["branch", "release-1.2"]);
    let main =
        upstream.commit("move the EnvoyProxy task", &[(ENVOY, "---\n- ansible.builtin.include_tasks: proxy.yaml\n")]);
    let row = |profile: &str, r: &str, sha: &str| {
        serde_json::json!({"profile": profile, "name": "eas", "repo": "intel/enterprise-ai-solutions", "ref": r,
            "sha": sha, "locked": false, "date": "d", "source": "s"})
    };
    let pins = upstream.dir.parent().unwrap().join("pins.json");
    let doc = serde_json::json!({"schema": "eas-pins/v1",
        "pins": [row("main", "main", &main[..7]), row("v1.2.0-rc.1", "v1.2.0-rc.1", &rc[..7])]});
    std::fs::write(&pins, doc.to_string()).unwrap();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/overlay-check.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&upstream.dir)
        .args(["--profiles", "--pins", pins.to_str().unwrap()])
        .env("EAS", env!("CARGO_BIN_EXE_eas"))
        .env("XDG_CONFIG_HOME", std::env::temp_dir().join("eas-test-no-config"))
        .env_remove("EAS_PINS")
        .env("EAS_NO_FETCH", "1")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let r = Run::from(out);
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    let section = |head: &str| -> String {
        let start = r.stdout.find(head).unwrap_or_else(|| panic!("{head}: {}", r.stdout));
        let rest = &r.stdout[start + head.len()..];
        rest[..rest.find("\n== ").unwrap_or(rest.len())].to_string()
    };
    let at_main = section(&format!("== profile main: EAS main at {main}"));
    let at_rc = section(&format!("== profile v1.2.0-rc.1: EAS v1.2.0-rc.1 at {rc}"));
    for s in [&at_main, &at_rc] {
        assert!(s.contains("| row | decision | fact | source |"), "{s}");
        assert!(s.contains("| 0002 | apply 0002 variant istio-helm-task |"), "{s}");
    }
    assert!(at_rc.contains("| 0006 | apply 0006 variant release-1.2 |"), "{at_rc}");
    assert!(!at_rc.contains("STOP"), "{at_rc}");
    assert!(at_main.contains("| 0006 | STOP"), "{at_main}");
    assert!(at_main.contains(&format!("regenerate 0006 against {main}")), "{at_main}");
    assert!(at_main.contains(ENVOY), "{at_main}");
}

/// Where a synthetic EAS tree moved the EnvoyProxy task to (main-like, PR #251 says the task moved
/// at EAS main 97f6157; that commit cannot be read, so the move is ours), and install.yaml's
/// include of it.
const MOVED: &str = "roles/envoy_gateway/tasks/envoyproxy.yaml";
const INCLUDE: &str = "---\n- ansible.builtin.include_tasks: envoyproxy.yaml\n";

/// 0006's row may follow its hunk inside the role (`may_move_to: roles/envoy_gateway/**`): with the
/// task moved to another file of the role, 0006 applies there, the decision cites the file and
/// the lines its context was found at, and --apply patches that file only.
#[test]
fn a_moved_envoyproxy_task_gets_0006_applied_where_it_moved_and_cited() {
    let repo = Repo::release_1_2();
    let at = repo.commit("envoy_gateway: move the EnvoyProxy task", &[(ENVOY, INCLUDE), (MOVED, ENVOY_TASK)]);
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.choice("0006"), format!("apply 0006 variant release-1.2 (moved: {MOVED})"));
    // The context (kubernetes: .. operator: Exists) is lines 9-16 of the moved file.
    assert!(
        r.line("0006").contains(&format!("applies in the file its hunk moved to (moved: {MOVED}:9-16)")),
        "{}",
        r.line("0006")
    );
    assert!(
        r.line("0006").ends_with(&format!("[intel/enterprise-ai-solutions@{} {MOVED}:9-16]", &at[..7])),
        "{}",
        r.line("0006")
    );
    let patched = repo.read(MOVED);
    assert!(patched.contains("operator: Exists\n") && !patched.contains("control-plane: \"\""), "{patched}");
    assert_eq!(repo.read(ENVOY), INCLUDE, "install.yaml is left as upstream has it");
    assert_eq!(git(&repo.dir, &["diff", "--name-only"]).lines().collect::<Vec<_>>(), [MOVED, ISTIO, NRI]);
}

/// Two files of the role holding 0006's context: the overlay never guesses, it STOPs naming both.
#[test]
fn two_places_holding_0006s_context_stop() {
    let repo = Repo::release_1_2();
    let other = "roles/envoy_gateway/tasks/envoyproxy-ha.yaml";
    let at = repo
        .commit("envoy_gateway: two EnvoyProxy tasks", &[(ENVOY, INCLUDE), (MOVED, ENVOY_TASK), (other, ENVOY_TASK)]);
    let before = repo.snapshot();
    let r = repo.overlay(&["--apply"]);
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.choice("0006"), format!("STOP: regenerate 0006 against {at}"));
    let line = r.line("0006");
    assert!(line.contains("found in 2 places it may have moved to"), "{line}");
    assert!(line.contains(&format!("{MOVED}:9 (hunk 1)")) && line.contains(&format!("{other}:9 (hunk 1)")), "{line}");
    assert_eq!(repo.snapshot(), before, "STOP writes nothing");
    // The same context twice in one moved file is as ambiguous.
    let twice = format!("{ENVOY_TASK}{}", ENVOY_TASK.trim_start_matches("---\n"));
    repo.commit("envoy_gateway: one file, two proxies", &[(MOVED, &twice), (other, "---\n")]);
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert!(r.line("0006").contains("found in 2 places"), "{}", r.line("0006"));
}

/// Upstream carrying 0006's change in the file the task moved to: `merged`, citing that file.
#[test]
fn a_merged_fix_in_the_moved_file_is_merged() {
    let repo = Repo::release_1_2();
    let patch = Path::new(env!("CARGO_MANIFEST_DIR")).join("patches/0006-envoy-cp-selector.release-1.2.patch");
    git(&repo.dir, &["apply", patch.to_str().unwrap()]);
    let patched = repo.read(ENVOY);
    repo.commit(
        "envoy_gateway: move the task, selecting control planes with Exists",
        &[(ENVOY, INCLUDE), (MOVED, &patched)],
    );
    let r = repo.overlay(&[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.choice("0006"), "merged 0006 (nothing to apply)");
    assert!(
        r.line("0006").contains(&format!("reverse-applies in the file its hunk moved to (moved: {MOVED}:")),
        "{}",
        r.line("0006")
    );
}

/// A row's `fixed` probe follows its file too: with 0002's row allowed to move inside the Istio
/// role, an Istio task moved to another file that sets global.platform from istio_platform is
/// `fixed`, citing the moved file; without `may_move_to` the same tree STOPs.
#[test]
fn the_fixed_probe_follows_a_moved_file() {
    let repo = Repo::release_1_2();
    let helm = "roles/istio/tasks/helm.yaml";
    let fixed = with_values(ISTIO_TASK, "\"{{ istio_platform | default('') }}\"");
    repo.commit(
        "istio: move the Helm task",
        &[(ISTIO, "---\n- ansible.builtin.include_tasks: helm.yaml\n"), (helm, &fixed)],
    );
    let overlay = repo.dir.parent().unwrap().join("overlay");
    support_copy(&Path::new(env!("CARGO_MANIFEST_DIR")).join("patches"), &overlay);
    let json = std::fs::read_to_string(overlay.join("overlay.json")).unwrap();
    let r = repo.overlay(&["--overlay", overlay.to_str().unwrap()]);
    assert!(r.choice("0002").starts_with("STOP"), "without may_move_to: {}", r.line("0002"));
    let followed = json.replacen(
        "\"files\": [\"roles/istio/tasks/install.yaml\"],",
        "\"files\": [\"roles/istio/tasks/install.yaml\"], \"may_move_to\": [\"roles/istio/**\"],",
        1,
    );
    assert_ne!(followed, json);
    std::fs::write(overlay.join("overlay.json"), followed).unwrap();
    let r = repo.overlay(&["--overlay", overlay.to_str().unwrap()]);
    assert!(r.choice("0002").starts_with("fixed 0002 ("), "{}", r.line("0002"));
    assert!(r.line("0002").contains(&format!("(moved: {helm}:16)")), "{}", r.line("0002"));
    assert!(r.line("0002").ends_with(&format!("{helm}:16]")), "{}", r.line("0002"));
}

fn support_copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
