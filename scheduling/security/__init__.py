"""What gangweb lets in and out: outbound address rules, pinned outbound HTTP, the client's address through trusted
proxies, credentials encrypted at rest.
"""
