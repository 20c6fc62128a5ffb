//! The integration tests, one binary: `cargo test --test it`. Each module was a file of its
//! own under tests/ (and a test binary of its own); `support` is the harness they share,
//! compiled once. A test's name is `<module>::<test>`: `cargo test --test it up_cycle::` runs
//! one module, `cargo test --test it up_cycle::up_verify_down_and_down_again` one test.
//!
//! Plain `cargo test` leaves out the Docker tier: the modules below the second heading, and
//! the tests of `interrupt` and `progress_pty` marked with the feature, need a Docker Engine
//! and compile only with the `docker-tests` feature (`cargo test --features docker-tests`),
//! which scripts/test.sh and CI turn on. Each test of the tier takes its turn at the engine
//! (`support::docker::engine`) and fails when no engine answers: none is ever skipped.

// The harness: the recorded-cluster server, stand-ins, synthetic trees, `eas` run isolated.
mod support;

// Without a Docker Engine (the few engine tests inside interrupt and progress_pty aside).
mod blockers; // the dry run lists every blocker the real `eas up` stops at, in order
mod ci_smoke; // scripts/ci-smoke.sh and scripts/install-k3d.sh, with a stub k3d
mod cluster_server; // the recorded-cluster server itself: selectors, paging, writes served back
mod completions; // `eas completions`, `eas man`, `eas schema`
mod config_file; // eas.yaml: declared runs, unknown keys, `eas init`
mod config_golden; // `eas config` on every case of fixtures/config/ (golden files)
mod facts_errors; // `eas facts` when the API, the kubeconfig or Docker is wrong
mod facts_recorded; // `eas facts` against the recorded clusters (golden facts)
mod facts_to_config; // `eas facts` fed unchanged into `eas config`
mod fit; // `eas fit` on fixtures/fit (golden tables and documents)
mod hardening; // hostile and unlucky input (issues 10 and 23)
mod interrupt; // SIGINT/SIGTERM while a phase waits (its two `eas up` tests: Docker tier)
mod json_documents; // `--output json`: one document that validates, whatever happened
mod knob_audit; // the knob audit of `eas up --dry-run` on the synthetic trees
mod kubeconfig_list; // `KUBECONFIG=a:b` merged like kubectl
mod overlay; // `eas overlay` on synthetic git repositories
mod phase_timeouts; // every plan-half phase's timeout, at its effective value
mod pins; // `eas pins check` and `eas pins lock`
mod plan_output; // `eas up --dry-run` as text and JSON (golden fixtures/plan/)
mod prereq; // the cluster's prerequisites, each case of fixtures/prereq/cases.json
mod progress_pty; // progress on a tmux terminal (its bastion build test: Docker tier)
mod proxy; // `eas facts` behind a real forward proxy
mod real_catalog; // the real EI catalog's entries, offline
mod state_room; // a read-only or full state directory: a blocker in the plan and doctor
mod support_bundle; // `eas support-bundle` against secrets nobody named
mod verify_cluster; // `eas verify` against recorded clusters

// The Docker tier: only with `--features docker-tests`, and a Docker Engine.
#[cfg(feature = "docker-tests")]
mod base_digest; // `eas bastion build --lock` records the base image's digest (a local registry)
#[cfg(feature = "docker-tests")]
mod bastion; // `eas bastion` with the real Dockerfile
#[cfg(feature = "docker-tests")]
mod docker_context; // the Docker endpoint follows the current docker context
#[cfg(feature = "docker-tests")]
mod down_safety; // `eas down` never loses data; crash consistency
#[cfg(feature = "docker-tests")]
mod facts_docker; // `eas facts` on k3d node containers
#[cfg(feature = "docker-tests")]
mod sentinel; // no planted secret in any output or file after a real run
#[cfg(feature = "docker-tests")]
mod up_cycle; // `eas up` -> `eas verify` -> `eas down` end to end
