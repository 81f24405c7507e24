"""The DRF API: serializers validate, views call the host, permissions are classes."""
