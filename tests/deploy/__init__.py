"""CI checks of deploy/, offline: the image, the Kubernetes manifests, what watches Sidekick, the
walls as deployed."""
