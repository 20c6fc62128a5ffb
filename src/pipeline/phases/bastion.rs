//! Bastion: the plan half checks what needs only the pins, each check on its own (the
//! requirements lock, the base image's digest, then the artifacts' sha256), then asks the Docker
//! Engine whether the image for this context exists (reuse) or must be built. The act half
//! builds it (it stops itself at its timeout and on the run's token, removing its step
//! container) or reuses it.

use crate::act::bastion;
use crate::error::Failure;
use crate::plan::{ImageAction, ImagePlan, PhaseId};

use crate::pipeline::phase::{Cx, NoPlan, Phase};
use crate::pipeline::runner::Runner;

pub struct Bastion {
    /// The Docker Engine preflight reached: `None`, a preflight blocker says why.
    pub docker: Option<bollard::Docker>,
    pub image: bastion::ImageSettings,
}

/// The image to build or reuse, with the engine that will do it.
pub struct Image {
    pub docker: bollard::Docker,
    pub plan: bastion::ImagePlan,
}

impl Phase for Bastion {
    const ID: PhaseId = PhaseId::Bastion;
    const STOPS_ITSELF: bool = true;
    type Planned = Image;
    type Done = bastion::Prepared;

    fn says(&self, _cx: &Cx<'_>) -> String {
        "planning the pinned bastion image (build or reuse)".into()
    }

    async fn plan(&mut self, _cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Image, NoPlan> {
        let pins = pin_checks(&self.image);
        if !pins.is_empty() {
            return Err(NoPlan::Blocked(pins));
        }
        let Some(docker) = self.docker.clone() else { return Err(NoPlan::Upstream) };
        let plan = bastion::plan_image(&docker, &self.image).await.map_err(Failure::from)?;
        Ok(Image { docker, plan })
    }

    fn note(&mut self, image: &mut Image, r: &mut Runner) -> Result<(), Failure> {
        let action = if image.plan.existing.is_some() { ImageAction::Reuse } else { ImageAction::Build };
        r.plan.image = Some(ImagePlan { tag: image.plan.tag.clone(), action });
        Ok(())
    }

    async fn act(self, image: Image, cx: &Cx<'_>, r: &mut Runner) -> Result<bastion::Prepared, Failure> {
        // The build stops itself at the phase's timeout (its spinner counts against it) and on
        // the run's token, removing its step container and layers before it returns.
        let (limit, interrupt) = (r.timeouts.get(PhaseId::Bastion), r.interrupt.clone());
        let prepared = bastion::build_planned(&image.docker, image.plan, false, limit, cx.shell, &interrupt)
            .await
            .map_err(Failure::from)?;
        r.state.bastion_image = Some(format!("{} ({})", prepared.tag, prepared.id));
        Ok(prepared)
    }
}

/// The bastion's checks that need only the pins, each on its own: the requirements lock, the
/// base image's digest, then the artifacts' sha256.
pub fn pin_checks(args: &bastion::ImageSettings) -> Vec<Failure> {
    bastion::pin_checks(args).into_iter().map(Failure::from).collect()
}
