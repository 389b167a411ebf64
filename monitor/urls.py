from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from monitor.api.routes import api
from monitor.health import health
from monitor.web import scrape

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("metrics", scrape.metrics, name="prometheus"),  # Prometheus' default path
    re_path(r"^health/?$", health, name="health"),  # no login: for an outside uptime check
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("monitor.web.urls")),
]
