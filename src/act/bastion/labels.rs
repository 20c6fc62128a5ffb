//! The labels eas puts on what it makes in Docker (images and containers): a leaf, so the
//! image build and the container run read them without importing the bastion module above them.

/// On the images and containers eas makes.
pub const MANAGED_LABEL: &str = "io.eas.managed";
/// The label carrying the id of the run that made a bastion container.
pub const RUN_LABEL: &str = "io.eas.run";
/// On a bastion image: the sha256 of the build context it was built from.
pub const CONTEXT_LABEL: &str = "io.eas.context-sha256";
