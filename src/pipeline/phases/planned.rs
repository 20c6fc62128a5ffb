//! What the plan halves of `eas up` settled ([`Planned`]: what a phase could not settle is `None`,
//! and a blocker says why), and what the act halves consume once no plan half blocked
//! ([`Ready`]). Apart from the phases' files, so that none of them imports a file that imports it.

use crate::error::Failure;
use crate::facts::Facts;

use crate::pipeline::phases::missing;

/// Everything the plan halves settled; what a phase could not settle is `None`, and a blocker
/// says why ([`Planned::ready`] turns it into what the acts need).
pub struct Planned {
    pub pre: crate::pipeline::phases::preflight::Pre,
    pub records: Option<crate::pipeline::phases::lock::Records>,
    pub facts: Facts,
    pub image: Option<crate::pipeline::phases::bastion::Image>,
    pub decided: Option<crate::pipeline::phases::config::Decided>,
    /// The run's one EAS tree, in a temporary directory until the trees' act puts it in place.
    pub trees: Option<crate::pipeline::phases::trees::Scratch>,
    pub overlay: Option<crate::pipeline::phases::overlay::Decided>,
    pub classified: Option<crate::pipeline::day_two::Classified>,
    /// The settings filled from the last install's selection, which the acts read too.
    pub filled: Option<Box<crate::pipeline::recorded::Filled>>,
}

impl Planned {
    /// The files config decided (none when it could not decide).
    pub fn files(&self) -> &[(String, String)] {
        self.decided.as_ref().map(|d| d.files.as_slice()).unwrap_or_default()
    }

    /// The acts' inputs, once the plan has no blocker. A missing one without a blocker is a
    /// fault of eas's, reported as a failed step, never a panic.
    pub fn ready(self) -> Result<Ready, Failure> {
        let Planned { pre, records, facts, image, decided, trees, overlay, classified, .. } = self;
        Ok(Ready {
            pre,
            records: records.ok_or_else(|| missing("the lock"))?,
            facts,
            image: image.ok_or_else(|| missing("the bastion image"))?,
            decided: decided.ok_or_else(|| missing("the configuration"))?,
            trees: trees.ok_or_else(|| missing("the trees"))?,
            overlay: overlay.ok_or_else(|| missing("the overlay"))?,
            classified: classified.ok_or_else(|| missing("the classification"))?,
        })
    }
}

/// What the acts consume: present, because no plan half blocked.
pub struct Ready {
    pub pre: crate::pipeline::phases::preflight::Pre,
    pub records: crate::pipeline::phases::lock::Records,
    pub facts: Facts,
    pub image: crate::pipeline::phases::bastion::Image,
    pub decided: crate::pipeline::phases::config::Decided,
    pub trees: crate::pipeline::phases::trees::Scratch,
    pub overlay: crate::pipeline::phases::overlay::Decided,
    pub classified: crate::pipeline::day_two::Classified,
}
