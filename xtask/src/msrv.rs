//! `cargo xtask msrv`: checks that the library crates' declared `rust-version` holds
//! for a user who depends on them.
//!
//! The library crates are the workspace members that may be published (`benches` and
//! `xtask` are `publish = false` and declare newer versions of their own). Two checks,
//! in a copy of the workspace (manifests and sources, no `target`), so that the
//! committed `Cargo.lock` is left as it is. The copy is a workspace of the library
//! crates alone: features that `benches` turns on (`cuda-staging/cudarc`, which needs
//! Rust 1.88 through cudarc's `libloading`) would otherwise be unified into the
//! libraries' resolution, and a user depending on them gets their default features.
//!
//! 1. **Resolution.** A fresh `Cargo.lock` is resolved with
//!    `incompatible-rust-versions = fallback` (what the "3" resolver does by default,
//!    set explicitly here), as a new project depending on these crates would resolve
//!    it. Every package a library crate reaches through normal and build dependencies,
//!    on any platform, must declare a `rust-version` no newer than the library's
//!    (or none). Dev-dependencies are not checked: they build this workspace's tests,
//!    not the users' programs.
//! 2. **Build** (with `--toolchain`): `cargo check` of the library crates with that
//!    lockfile and the toolchain named by the `rust-version` (rustup must have it).
//!
//! The standard library's APIs are checked by clippy's `incompatible_msrv` lint, on by
//! default when `rust-version` is set, in the ordinary clippy run.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use cargo_metadata::semver::Version;
use cargo_metadata::{DependencyKind, MetadataCommand, PackageId};

use crate::cargo_util::{self, Metadata};
use crate::{project_root, Context, Result};

/// Options of `cargo xtask msrv`.
#[derive(clap::Args)]
pub struct Args {
    /// Also `cargo check` the library crates with the toolchain their rust-version
    /// names (`rustup toolchain install <version> --profile minimal` first).
    #[arg(long)]
    toolchain: bool,
}

/// Runs `cargo xtask msrv` with these options.
pub fn run(args: &Args) -> Result<()> {
    let meta = Metadata::load()?;
    let copy = meta.target_dir.join("msrv-workspace");
    let members: Vec<&Path> = meta.library_dirs().collect();
    copy_workspace(&project_root(), &members, &copy)?;
    let sh = cargo_util::shell()?;
    {
        let _dir = sh.push_dir(&copy);
        cargo_util::cargo(&sh)
            .args(["generate-lockfile", "--quiet"])
            .env("CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS", "fallback")
            .run()?;
    }
    let resolved = MetadataCommand::new()
        .current_dir(&copy)
        .other_options(vec!["--locked".to_string()])
        .exec()
        .context("cargo metadata of the copy")?;
    let graph = Graph::from(&resolved);
    let libraries: Vec<&cargo_metadata::Package> = resolved
        .workspace_packages()
        .into_iter()
        .filter(|p| {
            p.publish
                .as_ref()
                .is_none_or(|registries| !registries.is_empty())
        })
        .collect();
    if libraries.is_empty() {
        return Err("no publishable workspace member to check".into());
    }
    let mut failures = Vec::new();
    let mut versions = BTreeSet::new();
    for lib in &libraries {
        let msrv = lib
            .rust_version
            .clone()
            .ok_or_else(|| format!("{} declares no rust-version", lib.name))?;
        let deps = graph.normal_and_build_closure(&lib.id);
        let newest = deps
            .iter()
            .filter(|id| !resolved.workspace_members.contains(id))
            .filter_map(|id| graph.rust_version.get(id).map(|v| (v, id)))
            .max();
        for id in &deps {
            if let Some(v) = graph.rust_version.get(id).filter(|v| **v > msrv) {
                failures.push(format!(
                    "{} (rust-version {msrv}) depends on {} {}, which needs Rust {v}",
                    lib.name, graph.name[id], graph.version[id]
                ));
            }
        }
        match newest {
            Some((v, id)) => println!(
                "{} {}: rust-version {msrv}; {} dependencies, the newest rust-version outside the workspace {v} ({} {})",
                lib.name,
                lib.version,
                deps.len(),
                graph.name[id],
                graph.version[id]
            ),
            None => println!("{} {}: rust-version {msrv}; no dependency declares one", lib.name, lib.version),
        }
        versions.insert(msrv);
    }
    if !failures.is_empty() {
        return Err(format!(
            "dependencies newer than the MSRV:\n  {}",
            failures.join("\n  ")
        )
        .into());
    }
    if args.toolchain {
        for msrv in &versions {
            let toolchain = format!("{}.{}", msrv.major, msrv.minor);
            let _dir = sh.push_dir(&copy);
            let mut cmd = sh
                .cmd("rustup")
                .args(["run", &toolchain, "cargo", "check", "--locked", "--quiet"])
                .env("CARGO_TARGET_DIR", meta.target_dir.join("msrv"));
            for lib in libraries
                .iter()
                .filter(|l| l.rust_version.as_ref() == Some(msrv))
            {
                cmd = cmd.args(["-p", lib.name.as_str()]);
            }
            cmd.run().with_context(|| {
                format!("the library crates do not build with Rust {toolchain}")
            })?;
            println!("built with Rust {toolchain}: ok");
        }
    }
    Ok(())
}

/// The resolved dependency graph, by package id.
struct Graph {
    /// Each package's dependencies that are normal or build ones (on any platform).
    normal_and_build: BTreeMap<PackageId, Vec<PackageId>>,
    name: BTreeMap<PackageId, String>,
    version: BTreeMap<PackageId, Version>,
    rust_version: BTreeMap<PackageId, Version>,
}

impl Graph {
    fn from(meta: &cargo_metadata::Metadata) -> Graph {
        let mut normal_and_build = BTreeMap::new();
        for node in meta.resolve.iter().flat_map(|r| &r.nodes) {
            let deps = node
                .deps
                .iter()
                .filter(|d| {
                    d.dep_kinds
                        .iter()
                        .any(|k| matches!(k.kind, DependencyKind::Normal | DependencyKind::Build))
                })
                .map(|d| d.pkg.clone())
                .collect();
            normal_and_build.insert(node.id.clone(), deps);
        }
        let packages = || meta.packages.iter();
        Graph {
            normal_and_build,
            name: packages()
                .map(|p| (p.id.clone(), p.name.to_string()))
                .collect(),
            version: packages()
                .map(|p| (p.id.clone(), p.version.clone()))
                .collect(),
            rust_version: packages()
                .filter_map(|p| Some((p.id.clone(), p.rust_version.clone()?)))
                .collect(),
        }
    }

    /// Every package `root` reaches through normal and build dependencies.
    fn normal_and_build_closure(&self, root: &PackageId) -> BTreeSet<PackageId> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![root];
        while let Some(id) = todo.pop() {
            for dep in self.normal_and_build.get(id).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    todo.push(dep);
                }
            }
        }
        seen
    }
}

/// Copies what cargo reads of the workspace at `root` into `to` (emptied first): the
/// root manifest, with `members` as its only members, `.cargo/` and the `members`'
/// folders, without their `target` folders.
fn copy_workspace(root: &Path, members: &[&Path], to: &Path) -> Result<()> {
    if to.exists() {
        fs::remove_dir_all(to).with_context(|| format!("cannot clear {}", to.display()))?;
    }
    fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    copy_tree(&root.join(".cargo"), &to.join(".cargo"))?;
    let mut relative = Vec::new();
    for member in members {
        let r = member
            .strip_prefix(root)
            .with_context(|| format!("member {} outside the workspace", member.display()))?;
        copy_tree(member, &to.join(r))?;
        relative.push(r.to_string_lossy().replace('\\', "/"));
    }
    relative.sort();
    let manifest = root.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let text = with_members(&text, &relative)
        .ok_or_else(|| format!("{}: no `members = [...]` to rewrite", manifest.display()))?;
    fs::write(to.join("Cargo.toml"), text).context("cannot write the copy's Cargo.toml")?;
    Ok(())
}

/// `manifest` (a workspace's root Cargo.toml) with its `members = [...]` list (on one
/// line or several) replaced by `members`; `None` when it has none.
fn with_members(manifest: &str, members: &[String]) -> Option<String> {
    let start = manifest
        .find("\nmembers = [")
        .map(|i| i + 1)
        .or_else(|| manifest.starts_with("members = [").then_some(0))?;
    let end = start + manifest[start..].find(']')? + 1;
    let list: Vec<String> = members.iter().map(|m| format!("{m:?}")).collect();
    Some(format!(
        "{}members = [{}]{}",
        &manifest[..start],
        list.join(", "),
        &manifest[end..]
    ))
}

/// Copies a file or a folder (recursively, leaving out `target` folders); a symlink
/// is copied as the file it points to.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if from.is_dir() {
        fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
        for entry in
            fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
        {
            let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
            if entry.file_name() == "target" {
                continue;
            }
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if from.exists() {
        fs::copy(from, to).with_context(|| format!("cannot copy {}", from.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_holds_the_manifest_and_the_members_without_their_target_folders() {
        let sh = xshell::Shell::new().unwrap();
        let tmp = sh.create_temp_dir().unwrap();
        let root = tmp.path().join("ws");
        for f in [
            "Cargo.toml",
            "Cargo.lock",
            ".cargo/config.toml",
            "crates/a/Cargo.toml",
            "crates/a/src/lib.rs",
            "crates/a/target/x",
            "target/y",
            "docs/z.md",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, f).unwrap();
        }
        fs::write(
            root.join("Cargo.toml"),
            "[workspace]\nresolver = \"3\"\nmembers = [\n  \"crates/a\",\n  \"benches\",\n]\n\n[workspace.package]\n",
        )
        .unwrap();
        let to = tmp.path().join("copy");
        fs::create_dir_all(to.join("stale")).unwrap();
        copy_workspace(&root, &[&root.join("crates/a")], &to).unwrap();
        // Only the members copied are the copy's members.
        assert_eq!(
            fs::read_to_string(to.join("Cargo.toml")).unwrap(),
            "[workspace]\nresolver = \"3\"\nmembers = [\"crates/a\"]\n\n[workspace.package]\n"
        );
        assert_eq!(
            fs::read_to_string(to.join("crates/a/src/lib.rs")).unwrap(),
            "crates/a/src/lib.rs"
        );
        assert!(to.join("Cargo.toml").is_file());
        assert!(to.join(".cargo/config.toml").is_file());
        for gone in ["Cargo.lock", "crates/a/target", "target", "docs", "stale"] {
            assert!(!to.join(gone).exists(), "{gone}");
        }
    }
}
