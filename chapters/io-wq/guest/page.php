<?php
// The tiny script every PHP request runs (phpworker.php includes it with $path and $served
// set): a small HTML page, about 1.3 KiB, built from the path and a running count, so each
// response is computed rather than copied.
echo "<!DOCTYPE html>\n<html><head><title>io-wq</title></head><body>\n";
printf("<h1>%s</h1>\n<p>request %d of this worker</p>\n<ul>\n", htmlspecialchars($path), $served);
for ($i = 0; $i < 16; $i++)
	printf("<li>%2d %s</li>\n", $i, hash('sha256', $path . $i));
echo "</ul></body></html>\n";
