<?php
// PHP worker of the io-wq chapter's server (httpd.c --php): a persistent php-cgi process that
// reads one request path per line on stdin, runs the tiny script page.php for it with its
// output captured, and answers on stdout (a pipe the server splices to the socket) with one
// write: a 16-byte length line, then the body. A length of 0 before the first request says
// the worker is ready. Ends when the server closes its stdin.
$in = fopen('php://stdin', 'r');
$out = fopen('php://stdout', 'w');
if (!$in || !$out) {
	fwrite(STDERR, "phpworker: cannot open stdin or stdout\n");
	exit(1);
}
$served = 0;
if (fwrite($out, sprintf("%15d\n", 0)) !== 16 || !fflush($out))
	exit(1);
while (($path = fgets($in)) !== false) {
	$path = rtrim($path, "\n");
	ob_start();
	include __DIR__ . '/page.php';
	$body = ob_get_clean();
	$response = sprintf("%15d\n", strlen($body)) . $body;
	if (fwrite($out, $response) !== strlen($response) || !fflush($out))
		exit(1);
	$served++;
}
exit(0);
