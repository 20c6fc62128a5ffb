//! What `eas down`'s bastion runs (the installer's teardown, a Helm release's uninstall) run on:
//! the Docker Engine, the bastion image (the run's own while Docker has it, else one built from
//! the pins it kept: [`crate::pipeline::down::image`]), built or found at most once per `down`,
//! and the bastion's kubeconfig with an exec plugin's token minted once.

use crate::act::bastion;
use crate::act::bastion::run::{ContainerRunner, DockerRunner, Outcome, RunError, RunSpec, Sink, Stream};
use crate::error::Failure;
use crate::plan::Step;
use crate::state::journal::State;

use crate::pipeline::down::cx::{Cx, cancellable};
use crate::pipeline::down::image;

pub struct Bench {
    docker: bollard::Docker,
    /// The bastion the runs use (`down_image`): the run's own, else its pins'.
    image: image::TeardownImage,
    /// Its tag, once built or found.
    tag: tokio::sync::OnceCell<String>,
    /// The kubeconfig for the bastion, with an exec plugin's token minted once for this `down`.
    pub kube: crate::kubeconfig::KubeSource,
}

impl Bench {
    /// The engine, the bastion's kubeconfig and the image chosen for the record `state` (its line
    /// said under the teardown's).
    pub async fn new(cx: &Cx<'_>, state: &State) -> Result<Bench, Failure> {
        let docker = cx.docker().await?.clone();
        let minted = async { bastion::minted(&cx.kube, cx.shell).await.map_err(Failure::from) };
        let kube = cancellable(cx.interrupt, minted).await?;
        // The run's image while Docker has it, else the pins the run kept: never today's.
        let present = match image::recorded(state) {
            Some((tag, _)) => match docker.inspect_image(&tag).await {
                Ok(img) => img.id,
                Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => None,
                Err(e) => return Err(Failure::step_next(Step::DownRun, e, crate::hints::DOCKER)),
            },
            None => None,
        };
        let kept = state.pins_kept.as_ref().map(|k| k.file.clone()).filter(|f| f.exists());
        let (image, line) = image::choose(state, present.as_deref(), kept, &cx.args.pins);
        cx.shell.phase("teardown", line);
        Ok(Bench { docker, image, tag: tokio::sync::OnceCell::new(), kube })
    }

    /// The bastion image's tag: the run's own, or the one its kept pins build (or find), once.
    pub async fn tag(&self, cx: &Cx<'_>) -> Result<&str, Failure> {
        let tag = self.tag.get_or_try_init(|| async {
            match &self.image {
                image::TeardownImage::Recorded { tag } => Ok(tag.clone()),
                image::TeardownImage::FromPins(pins) => {
                    let args =
                        crate::pipeline::settings::image_args(&cx.args.image, pins.clone(), cx.global, &cx.proxy);
                    let p = bastion::prepare(&self.docker, &args, false, false, cx.shell, cx.interrupt).await?;
                    Ok::<_, Failure>(p.tag)
                }
            }
        });
        Ok(tag.await?.as_str())
    }

    /// Runs `spec` in the bastion, its output kept (not shown), stopped by `interrupt`.
    pub async fn run(
        &self,
        spec: &RunSpec,
        interrupt: &crate::runtime::Interrupt,
    ) -> Result<(Outcome, Vec<u8>), RunError> {
        let mut sink = Quiet(Vec::new());
        let outcome = DockerRunner::new(self.docker.clone()).run(spec, &mut sink, interrupt).await?;
        Ok((outcome, sink.0))
    }
}

struct Quiet(Vec<u8>);

impl Sink for Quiet {
    fn write(&mut self, _s: Stream, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}
