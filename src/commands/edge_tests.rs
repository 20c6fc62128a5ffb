//! The one table from the domain modules' errors to exit codes and the lines the user sees: each
//! module's error, built as that module makes it, through `Failure::from`.

use crate::act::bastion::BastionError;
use crate::act::bastion::artifacts::ArtifactError;
use crate::act::bastion::context::ContextError;
use crate::act::bastion::publisher::PublisherError;
use crate::error::Failure;
use crate::state::{StateDirError, journal, lock};
use std::path::{Path, PathBuf};

#[test]
fn a_missing_sha256_names_the_pins_file_it_is_missing_from() {
    let e = BastionError::InPins {
        pins: "/home/u/.config/eas/pins.json (the user's pins file)".into(),
        source: ContextError::MissingSha256(vec!["kubectl".into(), "helm".into()]),
    };
    let f = Failure::from(e);
    assert_eq!(f.exit_code(), 2);
    assert_eq!(
        f.lines()[0],
        "error: 2 bastion artifact(s) have no pinned sha256: kubectl, helm \
         (pins: /home/u/.config/eas/pins.json (the user's pins file))"
    );
    assert!(f.lines()[1].starts_with("hint: on a connected machine run `eas bastion build --lock`"), "{:?}", f.lines());
}

#[test]
fn a_cache_that_cannot_be_written_points_at_the_cache_not_the_network() {
    let e = BastionError::Artifact(ArtifactError::Cache {
        path: "/ro/eas/artifacts".into(),
        source: std::io::Error::from_raw_os_error(30),
    });
    let lines = Failure::from(e).lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[1].starts_with("next: the artifact cache must be writable and have free space: fix /ro/eas/artifacts"),
        "{lines:?}"
    );
    assert!(!lines[1].contains("network"), "{lines:?}");
}

#[test]
fn a_publishers_checksum_missing_is_refused_and_a_changed_download_fails() {
    let url = "http://127.0.0.1:1/kubectl";
    let missing = PublisherError::Missing { url: url.into(), detail: "404".into() };
    let f = Failure::from(BastionError::from(missing));
    assert_eq!(f.exit_code(), 3);
    assert!(f.lines()[0].starts_with("REFUSE: no publisher checksum for ") && f.lines()[0].contains(url));
    assert!(f.lines().iter().any(|l| l.contains("--trust-on-first-use")));
    let changed = ArtifactError::Mismatch { url: url.into(), expected: "a".repeat(64), computed: "b".repeat(64) };
    let f = Failure::from(BastionError::from(PublisherError::Artifact(changed)));
    assert_eq!(f.exit_code(), 1);
    assert!(f.lines()[0].starts_with("error: bastion artifacts: "), "{:?}", f.lines());
}

#[test]
fn prepare_errors_are_step_failures_with_a_next_step() {
    use crate::act::prepare::{global_config, models};
    let f = Failure::from(models::ModelsError::Tab { line: 3 });
    assert_eq!(f.exit_code(), 1);
    assert_eq!(f.lines()[0], "error: prepare: models.yaml line 3: a tab outside a comment");
    assert!(f.lines()[1].starts_with("next: restore env/<env>/models.yaml"));
    let f = Failure::from(global_config::GlobalConfigError::NotAMap { found: "a list".into() });
    assert_eq!(f.exit_code(), 1);
    assert!(f.lines()[1].starts_with("next: "), "{:?}", f.lines());
}

#[test]
fn installer_grammar_errors_are_bad_input() {
    use crate::installer::command::{GrammarError, init_argv};
    let f = Failure::from(GrammarError::Old { tree: "/w".into() });
    assert_eq!(f.exit_code(), 2);
    assert!(f.lines()[1].starts_with("hint: pin a newer EAS commit"));
    let f = Failure::from(init_argv("-x", "e").unwrap_err());
    assert_eq!(f.exit_code(), 2);
    assert!(f.lines()[0].contains("layer \"-x\""), "{:?}", f.lines());
}

#[test]
fn state_errors_map_to_the_exit_contract() {
    let p = PathBuf::from("/s/uid/state.json");
    let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    let held = lock::LockError::Held {
        path: "/s/uid/lock".into(),
        holder: lock::Holder {
            pid: 7,
            host: "h".into(),
            started: "t".into(),
            command: "eas up".into(),
            pid_start: None,
        },
    };
    let cases = [
        (Failure::from(StateDirError::NoHome), 2),
        (Failure::from(held), 1),
        (Failure::from(journal::JournalError::Newer { path: p.clone(), found: 2 }), 2),
        (Failure::from(journal::JournalError::Malformed { path: p.clone(), msg: "x".into() }), 2),
        (Failure::from(journal::JournalError::Write { path: p.clone(), source: io() }), 1),
    ];
    for (f, code) in cases {
        assert_eq!(f.exit_code(), code, "{f:?}");
        assert_eq!(f.lines().len(), 2, "a cause and what to do: {f:?}");
    }
}

#[test]
fn a_state_path_that_cannot_be_written_is_a_step_failure_with_its_cause() {
    let e = crate::state::run::io_failure(
        crate::plan::PhaseId::Lock,
        Path::new("/s/uid"),
        std::io::Error::from_raw_os_error(libc::ENOSPC),
    );
    let f = Failure::from(e);
    assert_eq!(f.exit_code(), 1);
    assert_eq!(f.lines()[0], "error: lock: /s/uid: No space left on device (os error 28)");
    assert!(f.lines()[1].starts_with("next: the disk holding /s/uid is full"), "{:?}", f.lines());
}

#[test]
fn reaping_that_fails_stops_the_lock_with_what_to_do() {
    use crate::act::reap::ReapError;
    let docker = || bollard::errors::Error::DockerResponseServerError { status_code: 500, message: "boom".into() };
    let f = Failure::from(ReapError::List(docker()));
    assert_eq!(f.exit_code(), 1);
    assert!(f.lines()[0].starts_with("error: lock: cannot list the dead run's containers: "), "{:?}", f.lines());
    assert_eq!(f.lines()[1], "next: check the Docker Engine");
    let f = Failure::from(ReapError::Remove { name: "eas-bastion-1".into(), id: "r1".into(), source: docker() });
    assert!(f.lines()[0].starts_with("error: lock: cannot remove eas-bastion-1, left by the dead run r1: "));
    assert_eq!(f.lines()[1], "next: remove it with `docker rm -f eas-bastion-1`, then run the command again");
}

#[test]
fn an_installer_that_failed_names_its_step_its_log_and_what_to_do() {
    use crate::act::install::InstallError;
    let e = InstallError::Installer {
        step: crate::plan::PhaseId::Install,
        cause: "the installer failed (exit 2)".into(),
        log: "/s/uid/logs/up.log".into(),
        next: "fix the cause, then `eas up`".into(),
    };
    let f = Failure::from(e);
    assert_eq!(f.exit_code(), 1);
    assert_eq!(
        f.lines(),
        vec![
            "error: install: the installer failed (exit 2); log: /s/uid/logs/up.log",
            "next: fix the cause, then `eas up`"
        ]
    );
    let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    let f = Failure::from(InstallError::Prepare { path: "/w/env/e/models.yaml".into(), source: io });
    assert!(f.lines()[0].starts_with("error: prepare: /w/env/e/models.yaml: "), "{:?}", f.lines());
    assert_eq!(Failure::from(InstallError::Interrupted).exit_code(), 130);
}

#[test]
fn the_pinned_catalog_unread_is_a_refusal_and_an_unknown_model_bad_input() {
    use crate::gather::catalog::CatalogError;
    let e = CatalogError::NotACatalog {
        path: "model_manager/models.yaml".into(),
        at: "ei@abcdef0".into(),
        source: crate::config::catalog::Catalog::parse("- not a map").unwrap_err(),
    };
    let f = Failure::from(e);
    assert_eq!(f.exit_code(), 3);
    assert!(f.lines()[0].starts_with("REFUSE: the EI catalog model_manager/models.yaml at ei@abcdef0 is not"));
    let f = Failure::from(CatalogError::BadInput { cause: "unknown model \"x\"".into(), hint: "--model takes".into() });
    assert_eq!(
        (f.exit_code(), f.lines()),
        (2, vec!["error: unknown model \"x\"".to_string(), "hint: --model takes".into()])
    );
}

#[test]
fn a_man_directory_that_is_a_file_is_bad_input() {
    let (_dir, file) = crate::testing::temp_path("f");
    std::fs::write(&file, "").unwrap();
    let f = Failure::from(crate::cli::docs::man_command(&file).unwrap_err());
    assert_eq!(f.exit_code(), 2);
    assert_eq!(f.lines()[0], format!("error: --out {} exists and is not a directory", file.display()));
    assert_eq!(f.lines()[1], "hint: pass a directory (it is created when missing)");
}

#[test]
fn a_pull_that_failed_does_not_blame_the_engine_that_answered() {
    use crate::act::bastion::image::ImageError;
    let pull = ImageError::Pull {
        reference: "debian:bookworm".into(),
        detail: "dial tcp: lookup registry: no such host".into(),
    };
    let f = Failure::from(BastionError::Image(pull));
    assert_eq!(f.exit_code(), 1);
    assert!(f.lines()[0].contains("cannot pull debian:bookworm: dial tcp"), "{:?}", f.lines());
    let next = &f.lines()[1];
    assert!(next.starts_with("next: the Docker Engine answered but could not pull debian:bookworm"), "{next}");
    assert!(next.contains("--base-image debian:bookworm@sha256:") && !next.contains("docker info"), "{next}");
    assert!(!next.contains("  "), "one space between words: {next}");
    // An engine that did not answer keeps its own hint.
    let f = Failure::from(BastionError::Image(ImageError::Connect("no socket".into())));
    assert!(f.lines()[1].starts_with("next: start the Docker service"), "{:?}", f.lines());
}

#[test]
fn a_build_that_failed_on_an_untrusted_certificate_names_it_and_its_fix_in_two_lines() {
    use crate::act::bastion::image::{ImageError, KnownCause};
    let e = ImageError::Build {
        error: "The command '/bin/sh -c pip install' returned a non-zero code: 1".into(),
        tail: vec!["Step 6/14 : RUN pip install".into()],
        known: Some(KnownCause::UntrustedCertificate),
    };
    let f = Failure::from(BastionError::Image(e));
    assert_eq!(f.exit_code(), 1);
    let lines = f.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("error: bastion build: the build failed: ")
            && lines[0].contains("CERTIFICATE_VERIFY_FAILED")
    );
    assert!(lines[1].starts_with("next: pass --ca-bundle FILE"), "{lines:?}");
    assert!(
        !lines.iter().any(|l| l.contains("Step 6/14")),
        "the build's lines are printed where it failed, not in the error"
    );
}
