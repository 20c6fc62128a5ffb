//! `eas bastion build|run`: the domain (`crate::act::bastion`) builds or finds the pinned image and
//! runs a command in it; here the tag is printed on stdout and a container's exit code becomes
//! the process's (a command run on the user's behalf passes its code through).

use crate::act::bastion::run::{self, ContainerRunner, DockerRunner, Outcome};
use crate::act::bastion::{
    BastionCommand, BastionError, BuildSettings, LockMode, RunSettings, image, installer_env, kubeconfig,
    minted_source, prepare, prepare_with, standard,
};
use crate::error::Failure;
use crate::output::Shell;
use crate::runtime::Interrupt;
use crate::settings::Global;

pub fn run(cmd: BastionCommand, global: &Global, shell: &Shell) -> Result<(), Failure> {
    crate::runtime::block_on(async {
        let interrupt = Interrupt::on_signals().map_err(|e| Failure::step(crate::plan::Step::Signals, e))?;
        match cmd {
            BastionCommand::Build(a) => build_command(&a, global, shell, &interrupt).await,
            BastionCommand::Run(a) => run_command(&a, global, shell, &interrupt).await,
        }
    })?
}

async fn build_command(
    a: &BuildSettings,
    global: &Global,
    shell: &Shell,
    interrupt: &Interrupt,
) -> Result<(), Failure> {
    let docker = image::connect(&global.env).await.map_err(BastionError::from)?;
    let mode = a.lock.then_some(LockMode { trust_on_first_use: a.trust_on_first_use });
    let p = prepare_with(&docker, &a.image, mode, a.rebuild, shell, interrupt).await?;
    tracing::debug!("{} is image {} (context sha256 {}, reused: {})", p.tag, p.id, p.digest, p.reused);
    shell.out(&p.tag);
    Ok(())
}

async fn run_command(a: &RunSettings, global: &Global, shell: &Shell, interrupt: &Interrupt) -> Result<(), Failure> {
    let env = global.env.lookup();
    let kube = minted_source(global, shell).await?;
    let docker = image::connect(&global.env).await.map_err(BastionError::from)?;
    let p = prepare(&docker, &a.image, false, false, shell, interrupt).await?;
    let std = standard(&p.tag, a.command.clone(), a.tree.as_deref(), Some(&kube), &env)?;
    let secret = |k: &str| installer_env().iter().any(|v| v.secret && v.name == k);
    let names: Vec<String> =
        std.spec.env.iter().map(|(k, _)| if secret(k) { format!("{k} (secret)") } else { k.clone() }).collect();
    let route = match &std.route {
        Some(kubeconfig::Route::Host) => "host network: the API server is on this host".to_string(),
        Some(kubeconfig::Route::K3dNetwork { network, server }) => format!("network {network}, API server {server}"),
        Some(kubeconfig::Route::Default) => "default network".to_string(),
        None => "default network, no kubeconfig".to_string(),
    };
    let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
    shell.phase("bastion", format!("running in {} ({route}; environment: {names})", p.tag));
    let runner = DockerRunner::new(docker);
    match runner.run(&std.spec, &mut run::Stdio, interrupt).await.map_err(BastionError::from)? {
        Outcome::Exited(0) => Ok(()),
        Outcome::Exited(code) => Err(Failure::Exit { step: crate::plan::Step::BastionRun, code: exit_byte(code) }),
        Outcome::Interrupted => Err(Failure::Interrupted),
        Outcome::TimedOut => Err(Failure::step(crate::plan::Step::BastionRun, "timed out")),
    }
}

/// A container's exit code as a process exit code (Docker reports 0..=255; anything else is a
/// failure, exit 1).
fn exit_byte(code: i64) -> u8 {
    u8::try_from(code).ok().filter(|c| *c != crate::plan::EXIT_SUCCESS).unwrap_or(crate::plan::Kind::Failed.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_pass_through() {
        assert_eq!([exit_byte(3), exit_byte(255), exit_byte(256), exit_byte(-1)], [3, 255, 1, 1]);
    }
}
