"""Create the first platform admin if none exists; the password comes from the environment or is generated."""
import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    """`manage.py bootstrap_admin`: user GANGWEB_ADMIN_USER (default "admin"), password GANGWEB_ADMIN_PASSWORD or a
    generated one, printed and kept in <state dir>/admin-password (mode 0600)."""

    help = "Create the first admin user if there is none, and print how to log in."

    def handle(self, *args, **options):
        users = get_user_model()
        username = os.environ.get("GANGWEB_ADMIN_USER", "admin")
        password_file = settings.STATE_DIR / "admin-password"
        if users.objects.filter(is_superuser=True).exists():
            hint = f" (password in {password_file})" if password_file.exists() else ""
            self.stdout.write(f"admin: log in as an existing superuser{hint}")
            return
        password = os.environ.get("GANGWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser(username, f"{username}@localhost", password)
        if not os.environ.get("GANGWEB_ADMIN_PASSWORD"):
            settings.STATE_DIR.mkdir(parents=True, exist_ok=True)
            password_file.write_text(password + "\n")
            password_file.chmod(0o600)
        self.stdout.write(self.style.SUCCESS(f"admin: created user '{username}' with password '{password}'"))
