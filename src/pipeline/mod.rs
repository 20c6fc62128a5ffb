//! The program's middle: `eas up` ([`up`]) and `eas down` ([`down`]) as lists of phases
//! ([`phases`], each a [`runner::Phase`]) run by one [`runner`], with what runs around them:
//! the run settings, `eas doctor`'s checks, the plan's view, the question before the first act,
//! the attempt's record, the day-two comparison and the closing report. Nothing below this module
//! imports it (`scripts/check-layers.sh`).

mod attempt;
pub(crate) mod day_two;
pub mod doctor;
pub mod down;
pub mod phase;
pub mod phases;
pub mod plan_view;
mod prompt;
pub mod recorded;
mod report;
pub mod runner;
pub(crate) mod selected;
pub mod services;
pub mod settings;
pub mod up;
