//! Bastion: the plan half checks what needs only the pins, each check on its own (the
//! requirements lock, the base image's digest, then the artifacts' sha256), then asks the Docker
//! Engine whether the image for this context exists (reuse) or must be built. The act half
//! builds it (it stops itself at its timeout and on the run's token, removing its step
//! container) or reuses it.

use crate::act::bastion;
use crate::error::Failure;
use crate::plan::{ImageAction, ImagePlan, PhaseId};

use crate::pipeline::phase::{Cx, NoPlan};
use crate::pipeline::runner::{Phase, Runner};

pub struct Bastion {
    /// The Docker Engine preflight reached: `None`, a preflight blocker says why.
    pub docker: Option<bollard::Docker>,
    pub image: bastion::ImageSettings,
}

impl Bastion {
    /// This run's image (its base flags and pins, its downloads through the run's proxy), on
    /// the engine given.
    pub fn of(cx: &Cx<'_>, docker: Option<bollard::Docker>) -> Bastion {
        let pins = cx.args.select.pins.clone();
        Bastion {
            docker,
            image: crate::pipeline::settings::image_args(&cx.args.image, pins, cx.global, &cx.services.proxy),
        }
    }
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

    async fn plan(&mut self, cx: &Cx<'_>, _found: &mut Vec<Failure>) -> Result<Image, NoPlan> {
        let found = pin_checks(&self.image, &cx.services.pins);
        if !found.is_empty() {
            return Err(NoPlan::Blocked(found));
        }
        let Some(docker) = self.docker.clone() else { return Err(NoPlan::Upstream) };
        let plan = bastion::plan_image(&docker, &self.image, &cx.services.pins).await.map_err(Failure::from)?;
        Ok(Image { docker, plan })
    }

    fn note(&mut self, image: &mut Image, r: &mut Runner) -> Result<(), Failure> {
        let action = if image.plan.existing.is_some() { ImageAction::Reuse } else { ImageAction::Build };
        r.plan_part(PhaseId::Bastion).image(ImagePlan { tag: image.plan.tag.clone(), action });
        Ok(())
    }

    async fn act(&mut self, image: Image, cx: &Cx<'_>, r: &mut Runner) -> Result<bastion::Prepared, Failure> {
        // The build stops itself at the phase's timeout (its spinner counts against it) and on
        // the run's token, removing its step container and layers before it returns.
        let (limit, interrupt) = (r.limit(PhaseId::Bastion), r.interrupt().clone());
        let prepared = bastion::build_planned(&image.docker, image.plan, false, limit, cx.shell, &interrupt)
            .await
            .map_err(Failure::from)?;
        r.journal().image(format!("{} ({})", prepared.tag, prepared.id));
        Ok(prepared)
    }
}

/// The bastion's checks that need only the pins, each on its own: the requirements lock, the
/// base image's digest, then the artifacts' sha256, on the run's pins.
pub fn pin_checks(args: &bastion::ImageSettings, pins: &crate::pins::Pins) -> Vec<Failure> {
    bastion::pin_checks(args, pins).into_iter().map(Failure::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::runner::tests::Fixture;

    /// The built-in pins with kubectl's sha256 recorded.
    fn with_kubectl_pinned() -> crate::pins::Pins {
        let mut doc: serde_json::Value = serde_json::from_str(crate::pins::EMBEDDED).unwrap();
        let rows = doc["pins"].as_array_mut().unwrap();
        let row = rows.iter_mut().find(|r| r["name"] == "kubectl").expect("kubectl's row");
        row["sha256"] = serde_json::Value::String("a".repeat(64));
        crate::pins::Pins::parse(&doc.to_string()).unwrap()
    }

    /// The plan half checks the pins the run read once (`Cx::services`) and never reads their
    /// source again: with the source gone, the blockers are the handed pins' own (the built-in
    /// ones lack four sha256s), and handed pins with kubectl's recorded lack three.
    #[tokio::test]
    async fn the_plan_half_checks_the_pins_it_is_handed_not_their_file() {
        let mut f = Fixture::new();
        let gone = crate::pins::Source::Flag("/nonexistent/eas-test/pins.json".into());
        let blockers = async |f: &Fixture| {
            let image =
                crate::pipeline::settings::image_args(&Default::default(), gone.clone(), &f.global, &f.services.proxy);
            match (Bastion { docker: None, image }).plan(&f.cx(), &mut Vec::new()).await {
                Err(NoPlan::Blocked(found)) => found.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"),
                _ => panic!("the pins' checks are blockers"),
            }
        };
        let said = blockers(&f).await;
        assert!(said.contains("4 bastion artifact(s) have no pinned sha256: kubectl"), "{said}");
        assert!(!said.contains("No such file"), "the source was read again: {said}");
        f.services.pins = with_kubectl_pinned();
        let said = blockers(&f).await;
        assert!(said.contains("3 bastion artifact(s) have no pinned sha256: helm"), "{said}");
    }
}
