//! The bastion image `eas down` tears down with: the one the run it removes built, while Docker
//! still has it (same tag, same image ID); else one built from the pins that run kept beside its
//! record; never today's pins, which may have moved since (a newer installer, other tools). Only
//! a record from before the pins were kept falls back to today's, and says so.

use std::path::PathBuf;

use crate::pins::Source;
use crate::state::journal::State;

/// What the teardown runs in.
#[derive(Debug, Clone, PartialEq)]
pub enum TeardownImage {
    /// The run's own image, by tag.
    Recorded { tag: String },
    /// An image built (or found) from these pins.
    FromPins(Source),
}

/// `tag (id)`, as the run records its image.
pub fn recorded(state: &State) -> Option<(String, String)> {
    let s = state.bastion_image.as_deref()?;
    let (tag, rest) = s.split_once(" (")?;
    Some((tag.to_string(), rest.strip_suffix(')')?.to_string()))
}

/// The choice, and the line that says it. `present` is the image ID Docker has for the recorded
/// tag (None when it has none); `kept` the pins file the run kept, when it still exists.
pub fn choose(state: &State, present: Option<&str>, kept: Option<PathBuf>, today: &Source) -> (TeardownImage, String) {
    let rec = recorded(state);
    if let Some((tag, id)) = &rec
        && present == Some(id.as_str())
    {
        return (TeardownImage::Recorded { tag: tag.clone() }, format!("with the image the run built: {tag} ({id})"));
    }
    let gone = match &rec {
        Some((tag, _)) if present.is_some() => format!("{tag} is now another image"),
        Some((tag, _)) => format!("{tag} is gone"),
        None => "the run recorded no image".to_string(),
    };
    match (kept, &state.pins_kept) {
        (Some(file), Some(k)) => {
            let line = format!(
                "{gone}: with an image from the pins the run recorded ({}, read from {}), not today's",
                file.display(),
                k.source
            );
            (TeardownImage::FromPins(Source::Flag(file)), line)
        }
        _ => (
            TeardownImage::FromPins(today.clone()),
            format!("{gone} and the run kept no pins: with today's pins ({})", today.describe()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::journal::KeptPins;

    fn state(image: Option<&str>, kept: bool) -> State {
        let mut s = State::sample("2026-12-04T00:00:00Z");
        s.bastion_image = image.map(str::to_string);
        s.pins_kept = kept.then(|| KeptPins { file: "/s/pins.json".into(), source: "/p/pins.json (--pins)".into() });
        s
    }

    #[test]
    fn the_runs_image_while_docker_has_it_else_the_runs_pins_never_todays() {
        let today = Source::Flag("/today/pins.json".into());
        let s = state(Some("eas-bastion:abc (sha256:1)"), true);
        let kept = || Some(PathBuf::from("/s/pins.json"));
        let (img, line) = choose(&s, Some("sha256:1"), kept(), &today);
        assert_eq!(img, TeardownImage::Recorded { tag: "eas-bastion:abc".into() });
        assert_eq!(line, "with the image the run built: eas-bastion:abc (sha256:1)");
        for (present, gone) in [(None, "eas-bastion:abc is gone"), (Some("sha256:2"), "is now another image")] {
            let (img, line) = choose(&s, present, kept(), &today);
            assert_eq!(img, TeardownImage::FromPins(Source::Flag("/s/pins.json".into())), "{line}");
            assert!(line.starts_with(gone) || line.contains(gone), "{line}");
            assert!(
                line.contains("the pins the run recorded (/s/pins.json, read from /p/pins.json (--pins)), not today's")
            );
        }
        // A record from before the pins were kept, or whose copy is gone.
        let (img, line) = choose(&state(Some("eas-bastion:abc (sha256:1)"), false), None, None, &today);
        assert_eq!(img, TeardownImage::FromPins(today.clone()));
        assert!(line.contains("kept no pins: with today's pins (/today/pins.json (--pins))"), "{line}");
        let (_, line) = choose(&state(None, true), None, None, &today);
        assert!(line.starts_with("the run recorded no image"), "{line}");
    }
}
