"""One module per optimization family; each registers its transform with `klineage.transform.register`.
`klineage.transform.load_families()` imports them all."""
