//! VeloC's configuration file: `key = value` lines (`#` or `;` start a
//! comment, `[section]` lines are ignored, as VeloC's INI reader does with
//! its single section). resmpi reads `scratch` and `persistent` (where
//! checkpoints go) and `max_versions`; the other VeloC keys (erasure
//! codes, AXL, watchdog) have no meaning without VeloC's backend and are
//! accepted and ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The keys of one configuration file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Config {
    values: BTreeMap<String, String>,
}

impl Config {
    /// Parse the text of a configuration file; a line that is not blank,
    /// a comment, a section or `key = value` is an error naming the line.
    pub fn parse(text: &str) -> Result<Config, String> {
        let mut values = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') && line.ends_with(']') {
                continue;
            }
            let (key, value) = line.split_once('=').ok_or_else(|| {
                format!("line {}: expected 'key = value', found '{line}'", index + 1)
            })?;
            let key = key.trim();
            if key.is_empty() {
                return Err(format!("line {}: empty key", index + 1));
            }
            values.insert(key.to_string(), value.trim().to_string());
        }
        Ok(Config { values })
    }

    /// The value of `key`, if the file gives one (an empty value is none).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }

    /// Where checkpoints go: `override_directory` (mpiexec's `--ckpt-dir`,
    /// `RESMPI_CKPT_DIR`) if given, else `persistent`, else `scratch`.
    /// resmpi writes one copy, so the durable path is preferred.
    pub fn checkpoint_directory(&self, override_directory: Option<&str>) -> Option<PathBuf> {
        override_directory
            .filter(|directory| !directory.is_empty())
            .or_else(|| self.get("persistent"))
            .or_else(|| self.get("scratch"))
            .map(PathBuf::from)
    }

    /// `max_versions`: how many versions of a checkpoint to keep per rank
    /// (0 or absent: all). A value that is not a number is an error.
    pub fn max_versions(&self) -> Result<u32, String> {
        match self.get("max_versions") {
            None => Ok(0),
            Some(text) => text
                .parse()
                .map_err(|_| format!("max_versions = '{text}': expected a count")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veloc_cfg_lines_comments_and_sections() {
        let config = Config::parse(
            "# heatdis\n[veloc]\nscratch = /tmp/scratch\n persistent=/tmp/persistent \n\
             ; comment\nmode = sync\nmax_versions = 2\n",
        )
        .unwrap();
        assert_eq!(config.get("scratch"), Some("/tmp/scratch"));
        assert_eq!(config.get("persistent"), Some("/tmp/persistent"));
        assert_eq!(config.get("mode"), Some("sync"));
        assert_eq!(config.max_versions(), Ok(2));
        assert_eq!(
            config.checkpoint_directory(None),
            Some(PathBuf::from("/tmp/persistent"))
        );
        assert_eq!(
            config.checkpoint_directory(Some("/ckpt")),
            Some(PathBuf::from("/ckpt"))
        );
    }

    #[test]
    fn scratch_alone_and_nothing() {
        let config = Config::parse("scratch = s\npersistent =\n").unwrap();
        assert_eq!(config.checkpoint_directory(None), Some(PathBuf::from("s")));
        assert_eq!(Config::default().checkpoint_directory(None), None);
        assert_eq!(Config::default().checkpoint_directory(Some("")), None);
    }

    #[test]
    fn a_line_without_equals_is_refused_with_its_number() {
        assert_eq!(
            Config::parse("scratch = a\nnonsense\n"),
            Err("line 2: expected 'key = value', found 'nonsense'".to_string())
        );
        assert!(Config::parse("max_versions = many")
            .unwrap()
            .max_versions()
            .is_err());
    }
}
