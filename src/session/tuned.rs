//! Classifiers tuned for one backend's model by `keyhole tune`, kept in the data directory,
//! one directory per backend and model: where tune writes its labels, model and report, and
//! the one lookup every session makes to rank with the model tuned for its backend.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dirs::Dirs;
use crate::feedback;
use crate::model::config::{BackendConfig, BackendKind};
use crate::rank::classifier::{Classifier, ModelError, Variant};

/// Why the model `keyhole tune` made is there but cannot be used; each names its file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TunedError {
    #[error("{}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a tuned model's description: {source}", .path.display())]
    Description {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "{}: changed or damaged since `keyhole tune` wrote it (its checksum is not the one {} records)",
        .0.display(),
        INFO_FILE
    )]
    Changed(PathBuf),
    #[error(transparent)]
    Classifier(#[from] ModelError),
    #[error("{}: has no RLPG-H head", .0.display())]
    NoHead(PathBuf),
}

/// Under the data directory: one directory per backend and model.
pub const DIR: &str = "tuned";
/// The tuned model, in its directory.
pub const CLASSIFIER_FILE: &str = "classifier.safetensors";
/// What the model was tuned for and on, in its directory; written last, so a model without it
/// is not used.
pub const INFO_FILE: &str = "tuned.json";
/// Version of [`TunedInfo`]; a file of another version is not used.
const VERSION: u32 = 1;

/// What a tuned model is for and what it learnt from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedInfo {
    pub version: u32,
    /// The backend's name in backends.toml, and the model it names ([`model_name`]).
    pub backend: String,
    pub model: String,
    pub variant: String,
    /// Labelled holes the model was trained and validated on.
    pub train_holes: usize,
    pub validation_holes: usize,
    pub repositories: Vec<String>,
    /// Top-1 success on the held-out holes, percent: the tuned model's, and the classifier's
    /// that ranked before it.
    pub success: f64,
    pub success_before: f64,
    /// Seconds since the epoch when it was written.
    pub unix_time: u64,
}

impl TunedInfo {
    /// `RLPG-H tuned for smol (SmolLM2-135M), 400 holes`: what a header says it ranks with.
    pub fn describe(&self) -> String {
        let model = match self.model == self.backend {
            true => String::new(),
            false => format!(" ({})", self.model),
        };
        format!(
            "{} tuned for {}{model}, {} holes",
            self.variant,
            self.backend,
            self.train_holes + self.validation_holes
        )
    }
}

/// The model a backend entry completes with: the server's model, a local model's file name,
/// else the backend's kind (the embedded model).
pub fn model_name(entry: &BackendConfig) -> String {
    if let Some(model) = &entry.model {
        return model.clone();
    }
    if let Some(name) = entry.path.as_deref().and_then(Path::file_name) {
        return name.to_string_lossy().into_owned();
    }
    match entry.kind {
        BackendKind::Embedded => crate::model::config::EMBEDDED.to_string(),
        kind => kind.name().to_string(),
    }
}

/// The directory of the model tuned for `entry` (none without a data directory): its name
/// readable, with a hash that keeps backends and models whose names read alike apart.
pub fn tuned_dir(dirs: &Dirs, entry: &BackendConfig) -> Option<PathBuf> {
    let model = model_name(entry);
    let slug = |text: &str| -> String {
        let kept: String = text
            .chars()
            .map(|c| match c.is_ascii_alphanumeric() || "._-".contains(c) {
                true => c,
                false => '_',
            })
            .take(48)
            .collect();
        kept.trim_start_matches('.').to_string()
    };
    let hash = blake3::hash(format!("{}\0{model}", entry.name).as_bytes()).to_hex();
    let name = format!("{}--{}--{}", slug(&entry.name), slug(&model), &hash[..8]);
    Some(dirs.data.as_ref()?.join(DIR).join(name))
}

/// [`TunedInfo`] as [`INFO_FILE`] holds it, with the checksum of the classifier it describes:
/// a file that was changed or damaged since (a flipped byte still loads, and ranks otherwise)
/// is refused. Files written before the checksum have none and are used as they are: refusing
/// them would throw away a tuning that took hours, and the weights are still checked on load.
#[derive(Serialize, Deserialize)]
struct StoredInfo {
    #[serde(flatten)]
    info: TunedInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    classifier_blake3: Option<String>,
}

/// A tuned model, loaded.
pub struct Tuned {
    pub info: TunedInfo,
    pub classifier: Classifier,
}

/// The model tuned for `entry`'s backend and model, if `keyhole tune` made one; an error names
/// the file that is there but cannot be used.
pub fn find(dirs: &Dirs, entry: &BackendConfig) -> Result<Option<Tuned>, TunedError> {
    let Some(dir) = tuned_dir(dirs, entry) else {
        return Ok(None);
    };
    let info_path = dir.join(INFO_FILE);
    let bytes = match std::fs::read(&info_path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TunedError::Unreadable {
                path: info_path,
                source,
            });
        }
    };
    let StoredInfo {
        info,
        classifier_blake3,
    } = serde_json::from_slice(&bytes).map_err(|source| TunedError::Description {
        path: info_path.clone(),
        source,
    })?;
    feedback::check_version(info.version, VERSION).map_err(|source| TunedError::Unreadable {
        path: info_path,
        source,
    })?;
    if info.backend != entry.name || info.model != model_name(entry) {
        return Ok(None);
    }
    let path = dir.join(CLASSIFIER_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(source) => return Err(TunedError::Unreadable { path, source }),
    };
    if let Some(expected) = classifier_blake3
        && blake3::hash(&bytes).to_hex().as_str() != expected
    {
        return Err(TunedError::Changed(path));
    }
    let classifier = Classifier::from_file_bytes(&bytes, &path)?;
    if !classifier.has(Variant::H) {
        return Err(TunedError::NoHead(path));
    }
    Ok(Some(Tuned { info, classifier }))
}

/// Records `info` as what the model in `dir` (written before) is, with its checksum, making it
/// the one sessions find.
pub fn record(dir: &Path, info: &TunedInfo) -> std::io::Result<()> {
    let classifier = std::fs::read(dir.join(CLASSIFIER_FILE))?;
    let stored = StoredInfo {
        info: TunedInfo {
            version: VERSION,
            ..info.clone()
        },
        classifier_blake3: Some(blake3::hash(&classifier).to_hex().to_string()),
    };
    let json = serde_json::to_vec_pretty(&stored).expect("tuned info serializes");
    feedback::write_atomic(&dir.join(INFO_FILE), &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, model: &str) -> BackendConfig {
        BackendConfig {
            name: name.into(),
            kind: BackendKind::OpenAi,
            base_url: Some("http://127.0.0.1:9".into()),
            model: Some(model.into()),
            ..BackendConfig::embedded()
        }
    }

    #[test]
    fn each_backend_and_model_has_its_own_directory_inside_the_data_directory() {
        let dirs = Dirs::under(Path::new("/tmp/k"));
        let a = tuned_dir(&dirs, &server("smol", "org/SmolLM2-135M")).unwrap();
        let b = tuned_dir(&dirs, &server("smol", "org/SmolLM2-360M")).unwrap();
        let c = tuned_dir(&dirs, &server("smol/x", "m")).unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("/tmp/k/data/tuned"), "{}", a.display());
        assert!(
            a.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("smol--org_SmolLM2-135M--")
        );
        assert_eq!(
            c.parent(),
            a.parent(),
            "no separator of the name makes a subdirectory"
        );
        assert_eq!(tuned_dir(&Dirs::none(), &server("smol", "m")), None);
        let local = BackendConfig::local("/models/tiny.Q8_0.gguf".into());
        assert_eq!(model_name(&local), "tiny.Q8_0.gguf");
        assert_eq!(model_name(&BackendConfig::embedded()), "embedded");
    }

    #[test]
    fn the_description_names_the_backend_its_model_and_the_holes() {
        let info = TunedInfo {
            version: VERSION,
            backend: "smol".into(),
            model: "SmolLM2-135M".into(),
            variant: "RLPG-H".into(),
            train_holes: 300,
            validation_holes: 100,
            repositories: vec!["a".into()],
            success: 40.0,
            success_before: 35.0,
            unix_time: 0,
        };
        assert_eq!(
            info.describe(),
            "RLPG-H tuned for smol (SmolLM2-135M), 400 holes"
        );
        let embedded = TunedInfo {
            backend: "embedded".into(),
            model: "embedded".into(),
            ..info
        };
        assert_eq!(embedded.describe(), "RLPG-H tuned for embedded, 400 holes");
    }
    #[test]
    fn a_description_written_before_checksums_still_finds_its_model() {
        let scratch = tempfile::tempdir().unwrap();
        let dirs = Dirs::under(scratch.path());
        let entry = BackendConfig::embedded();
        let dir = tuned_dir(&dirs, &entry).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let bundled = include_bytes!("../rank/classifier/bundled.safetensors");
        std::fs::write(dir.join(CLASSIFIER_FILE), bundled).unwrap();
        let info = TunedInfo {
            version: VERSION,
            backend: entry.name.clone(),
            model: model_name(&entry),
            variant: "RLPG-H".into(),
            train_holes: 3,
            validation_holes: 1,
            repositories: vec![],
            success: 1.0,
            success_before: 1.0,
            unix_time: 0,
        };
        // As keyhole wrote it before: the description alone.
        std::fs::write(dir.join(INFO_FILE), serde_json::to_vec(&info).unwrap()).unwrap();
        assert!(find(&dirs, &entry).unwrap().is_some());
        // As tune writes it now: with the checksum, which a changed byte no longer matches.
        record(&dir, &info).unwrap();
        assert!(find(&dirs, &entry).unwrap().is_some());
        let mut changed = bundled.to_vec();
        changed[bundled.len() / 2] ^= 1;
        std::fs::write(dir.join(CLASSIFIER_FILE), changed).unwrap();
        let error = find(&dirs, &entry).err().unwrap().to_string();
        assert!(error.contains("changed or damaged"), "{error}");
    }
}
