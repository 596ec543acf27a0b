"""The kernel house's core: what every family of programs shares (the WGSL template
mechanism first; spec, program, op, bind, layout and tuning move here as families do)."""
