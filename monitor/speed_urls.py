"""The speed page's URL, namespaced ``speed:`` (included at the site root by ``monitor.urls``)."""

from django.urls import path

from monitor import speed_views

app_name = "speed"

urlpatterns = [
    path("pairs/<slug:name>/speed/", speed_views.speed_page, name="page"),
]
