//! `eas down`: the teardown runs in the domain (`crate::pipeline::down`), printing its progress on
//! stderr as it goes; what it has to say on stdout comes back here: a dry run's preview of what
//! would be removed and kept, or that nothing was installed.

use crate::error::Failure;
use crate::output::Shell;
use crate::pipeline::down::{DownSettings, Said};
use crate::settings::Global;

pub fn run(args: &DownSettings, global: &Global, shell: &Shell) -> Result<(), Failure> {
    match crate::pipeline::down::run(args, global, shell)? {
        Said::NothingInstalled(line) => shell.out(crate::text::for_people(&line)),
        Said::Preview(lines) => {
            for l in &lines {
                shell.out(crate::text::for_people(l));
            }
            shell.out("Nothing was written to the cluster or the state directory.");
        }
        Said::Done => {}
    }
    Ok(())
}
