//! What changes the host and the cluster through Docker: the bastion image and its container
//! runs ([`bastion`]), the installer run in it ([`install`]), the edits to its env files
//! ([`prepare`]) and the removal of the containers a dead run left ([`reap`]). The installer's
//! command-line grammar and output reader stay in `crate::installer` (pure, read by the plan and
//! the state records below this layer).

pub mod bastion;
pub mod install;
pub mod prepare;
pub mod reap;
