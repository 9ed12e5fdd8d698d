//! Shared by the marker-driven tests (fixtures, planted): the marker lines of a tree's
//! `.php` files.

use std::path::Path;

/// (path relative to `root`, line number, the text after `tag`) for every line of every
/// `.php` file under `root` that holds `tag`.
pub fn marker_lines(root: &Path, tag: &str) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("php") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            for (i, line) in text.lines().enumerate() {
                if let Some(at) = line.find(tag) {
                    let rest = line[at + tag.len()..].to_string();
                    out.push((relative.clone(), u32::try_from(i + 1).unwrap(), rest));
                }
            }
        }
    }
    out
}
