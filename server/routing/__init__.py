"""One completion request end to end: prompt cut, backends, gate, router, cache, pipeline."""
