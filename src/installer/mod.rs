//! Driving `es_auto_installer.sh`: its command lines and grammar check ([`command`]), reading
//! its output ([`progress`]) and keeping secrets out of what is shown and logged ([`redact`]).
//! Pure: the process itself runs through the bastion's run seam.

pub mod command;
pub mod progress;
pub mod redact;
