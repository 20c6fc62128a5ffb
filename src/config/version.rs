//! The cluster's Kubernetes version against what the install needs: the floor below which EAS's
//! objects cannot be created (a refusal), and kubectl's version skew policy against the
//! bastion's pinned kubectl (a warning). Pure: a version string in, lines out.

use super::data::{KubectlSkew, KubernetesFloor};

/// `(major, minor)` of a `gitVersion` (`v1.24.17+k3s1`, `v1.30.0-rc.1`); `None` when it does not
/// read as one.
pub fn minor_of(git_version: &str) -> Option<(u32, u32)> {
    let v = git_version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '+', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.trim_end_matches('+').parse().ok()?;
    Some((major, minor))
}

/// The refusal for a server below the floor, naming the floor and its source.
pub fn below_floor(server: &str, floor: &KubernetesFloor) -> Option<String> {
    let (major, minor) = minor_of(server)?;
    (major == 1 && minor < floor.minor).then(|| {
        let source = crate::sources::get(&floor.source);
        format!(
            "Kubernetes {server} is below the floor v1.{}: {} ({}); upgrade the cluster to k3s v1.{} or newer",
            floor.minor,
            floor.what,
            source.short(),
            floor.minor
        )
    })
}

/// The warning for a server outside kubectl's skew policy against the pinned kubectl `kubectl`
/// (its release tag, `v1.37.2`).
pub fn outside_skew(server: &str, kubectl: &str, skew: &KubectlSkew) -> Option<String> {
    let (smaj, smin) = minor_of(server)?;
    let (kmaj, kmin) = minor_of(kubectl)?;
    (smaj != kmaj || smin.abs_diff(kmin) > skew.minors).then(|| {
        format!(
            "Kubernetes {server} is outside kubectl's version skew policy for the bastion's kubectl {kubectl} \
             (within {} minor either way: v1.{}..v1.{}): {}",
            skew.minors,
            kmin.saturating_sub(skew.minors),
            kmin + skew.minors,
            skew.what
        )
    })
}

/// The release tag of the bastion's kubectl in the pins eas ships (pins.json, profile bastion).
pub fn pinned_kubectl() -> Option<String> {
    let pins = crate::pins::Pins::parse(crate::pins::EMBEDDED).ok()?;
    pins.pins.into_iter().find(|p| p.profile == "bastion" && p.name == "kubectl").map(|p| p.git_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor() -> KubernetesFloor {
        KubernetesFloor {
            minor: 30,
            what: "EAS creates a ValidatingAdmissionPolicy".into(),
            source: "kubernetes-floor-vap".into(),
        }
    }

    #[test]
    fn versions_read_as_k3s_and_upstream_write_them() {
        assert_eq!(minor_of("v1.24.17+k3s1"), Some((1, 24)));
        assert_eq!(minor_of("v1.30.0-rc.1"), Some((1, 30)));
        assert_eq!(minor_of("1.37"), Some((1, 37)));
        assert_eq!(minor_of("unknown"), None);
    }

    #[test]
    fn the_floor_refuses_below_and_names_its_source() {
        let line = below_floor("v1.29.9+k3s1", &floor()).unwrap();
        assert!(line.contains("below the floor v1.30"), "{line}");
        assert!(line.contains("route-hostname-admission-policy.yaml.j2"), "{line}");
        assert!(line.contains("intel/enterprise-ai-solutions@cc887cb"), "{line}");
        assert_eq!(below_floor("v1.30.0+k3s1", &floor()), None);
        assert_eq!(below_floor("v1.37.1+k3s1", &floor()), None);
        assert_eq!(below_floor("garbage", &floor()), None, "an unreadable version is not judged here");
    }

    #[test]
    fn skew_is_one_minor_either_way_of_the_pinned_kubectl() {
        let skew = KubectlSkew { minors: 1, what: "policy".into() };
        assert_eq!(outside_skew("v1.36.0+k3s1", "v1.37.2", &skew), None);
        assert_eq!(outside_skew("v1.38.1", "v1.37.2", &skew), None);
        let w = outside_skew("v1.35.4+k3s1", "v1.37.2", &skew).unwrap();
        assert!(w.contains("v1.36..v1.38") && w.contains("kubectl v1.37.2"), "{w}");
        assert!(outside_skew("v1.39.0", "v1.37.2", &skew).is_some());
        assert_eq!(pinned_kubectl().as_deref(), Some("v1.37.2"), "pins.json's bastion kubectl");
    }
}
