//! The documentation's links: every relative link and `#anchor` in README.md, CONTRIBUTING.md,
//! docs/ and benches/README.md resolves (the file exists; the anchor is a heading of that file,
//! as GitHub spells heading anchors, or an explicit `<a id>`), every page of docs/ is reachable
//! from the README, and the README stays a front door (at most 300 lines).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The pages whose links are checked, relative to the repository's root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "benches/README.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("a docs/ directory")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path| path.strip_prefix(root).unwrap().to_owned())
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks, with their numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match fence {
            Some(open) if trimmed.starts_with(open) => fence = None,
            Some(_) => {}
            None if trimmed.starts_with("```") => fence = Some("```"),
            None if trimmed.starts_with("~~~") => fence = Some("~~~"),
            None => lines.push((n + 1, line)),
        }
    }
    lines
}

/// `line` without its inline code spans (a link inside backquotes is not a link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        out.push_str(&rest[..open]);
        let ticks = rest[open..].chars().take_while(|c| *c == '`').count();
        let after = &rest[open + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(close) => rest = &after[close + ticks..],
            None => {
                rest = after;
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the links on `line`: `[text](target)`, `![alt](target)`, `[ref]: target`
/// and `href="target"`.
fn targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut found = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find([')', ' ']).unwrap_or(after.len());
        found.push(after[..end].trim_matches(['<', '>']).to_owned());
        rest = &after[end..];
    }
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        if let Some((label, target)) = trimmed.split_once("]:") {
            if !label.contains(']') {
                found.push(target.split_whitespace().next().unwrap_or("").to_owned());
            }
        }
    }
    for part in line.split("href=\"").skip(1) {
        found.push(part.split('"').next().unwrap_or("").to_owned());
    }
    found
}

/// GitHub's anchor for a heading: its text as rendered (code spans keep their content, links
/// their text, emphasis loses its markers), lower-cased, without punctuation but `-` and `_`,
/// spaces made `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link's text stands for the link.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").zip(after.find(')')) {
            Some((mid, close)) if mid < close => {
                text.push_str(&after[..mid]);
                rest = &after[close + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a Markdown page: its headings' (a repeated one gets `-1`, `-2`, ... as on
/// GitHub) and its explicit `<a id="...">` / `<a name="...">`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose(text) {
        let level = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&level) && line[level..].starts_with(' ') {
            let base = slug(line[level..].trim().trim_end_matches('#').trim());
            let n = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for attr in ["<a id=\"", "<a name=\""] {
            for part in line.split(attr).skip(1) {
                anchors.insert(part.split('"').next().unwrap_or("").to_owned());
            }
        }
    }
    anchors
}

/// `path` with `.` and `..` resolved lexically (the files need not exist).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link of the checked pages, as `page:line: target (why)`; and the pages of
/// docs/ that the README links to.
fn check(root: &Path) -> (Vec<String>, BTreeSet<PathBuf>) {
    let mut broken = Vec::new();
    let mut from_readme = BTreeSet::new();
    for page in pages(root) {
        let text = std::fs::read_to_string(root.join(&page))
            .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for (n, line) in prose(&text) {
            for target in targets(line) {
                let place = format!("{}:{n}: {target}", page.display());
                if target.is_empty() {
                    broken.push(format!("{place} (empty link)"));
                    continue;
                }
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let resolved = if file.is_empty() {
                    page.clone()
                } else {
                    normalise(&page.parent().unwrap_or(Path::new("")).join(file))
                };
                if page == Path::new("README.md") {
                    from_readme.insert(resolved.clone());
                }
                let on_disk = root.join(&resolved);
                if resolved.as_os_str().is_empty() || !on_disk.exists() {
                    broken.push(format!("{place} (no such file)"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if resolved.extension().is_none_or(|e| e != "md") {
                    broken.push(format!(
                        "{place} (an anchor in a file that is not Markdown)"
                    ));
                    continue;
                }
                let target_text = std::fs::read_to_string(&on_disk).unwrap();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!(
                        "{place} (no heading or <a id> makes #{anchor} in {})",
                        resolved.display()
                    ));
                }
            }
        }
    }
    (broken, from_readme)
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (broken, from_readme) = check(root);
    assert!(
        broken.is_empty(),
        "broken links in the documentation:\n{}",
        broken.join("\n")
    );
    for page in pages(root).into_iter().filter(|p| p.starts_with("docs")) {
        assert!(
            from_readme.contains(&page),
            "README.md does not link to {}",
            page.display()
        );
    }
    for page in ["CONTRIBUTING.md", "benches/README.md"] {
        assert!(
            from_readme.contains(Path::new(page)),
            "README.md does not link to {page}"
        );
    }
}

#[test]
fn the_readme_is_a_front_door() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines; at most 300");
    // Its first lines are the two commands: a run against the local Redis, and the tests.
    let first: Vec<&str> = readme.lines().take(6).collect();
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("cargo run --release -- run --key demo")),
        "{first:#?}"
    );
    assert!(
        first.iter().any(|l| l.starts_with("make test ")),
        "{first:#?}"
    );
}

/// The checker itself: it finds what it should, and only that.
#[test]
fn the_link_checker_knows_github_anchors() {
    assert_eq!(
        slug("`status --json` and `list --json`"),
        "status---json-and-list---json"
    );
    assert_eq!(
        slug("Messages for programs (`--log-format json`)"),
        "messages-for-programs---log-format-json"
    );
    assert_eq!(
        slug("Sentinel (`redis+sentinel://`)"),
        "sentinel-redissentinel"
    );
    assert_eq!(slug("See [the guide](guide.md) now"), "see-the-guide-now");
    let page = "# A\n## A\n```\n# not a heading\n```\n<a id=\"x\"></a>\n### Ünïcode_ok?\n";
    assert_eq!(
        anchors(page),
        ["a", "a-1", "x", "ünïcode_ok"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(
        targets("see [a](b.md#c), `[no](code.md)`, ![i](img.svg) and [d](https://x.y/z)"),
        ["b.md#c", "img.svg", "https://x.y/z"]
    );
    assert_eq!(targets("[ref]: docs/guide.md#x"), ["docs/guide.md#x"]);
    assert_eq!(
        normalise(Path::new("docs/../README.md")),
        Path::new("README.md")
    );
}
