"""The kernel house's core: what every family of programs shares — the spec machinery (base),
the registry, WGSL reflection, layout helpers, and loading and rendering WGSL templates."""
