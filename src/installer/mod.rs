//! Driving `es_auto_installer.sh`: its command lines and grammar check ([`command`]), reading
//! its output ([`progress`]); secrets are kept out of what is shown and logged by
//! `crate::secrets`.
//! Pure: the process itself runs through the bastion's run seam.

pub mod command;
pub mod progress;
