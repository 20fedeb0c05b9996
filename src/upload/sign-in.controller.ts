import { Controller, Get, HttpStatus, Post, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { ApiError } from '../common/api-error';
import { RawData } from '../common/negotiation.guard';
import { publicBaseUrl } from '../common/public-uri';
import { AppConfig } from '../config/app-config';
import { Access } from '../security/access.decorator';
import {
  RequestAccessService,
  SESSION_COOKIE,
  sessionCookieOf,
} from '../security/request-access.service';
import { SignInService } from './sign-in.service';

/** Names the sign-in under way; only the callback reads it. */
const SIGN_IN_COOKIE = 'svc_sign_in';
const SIGN_IN_PATH = '/svc/sign-in';

function signInCookieOf(req: Request): string | null {
  const header = req.headers.cookie ?? '';
  const match = new RegExp(`(?:^|;\\s*)${SIGN_IN_COOKIE}=([\\w-]{20,100})(?:;|$)`).exec(header);
  return match ? match[1] : null;
}

/**
 * The upload page's sign-in with the identity provider (docs/security.md): start, the
 * provider's redirect back, sign-out, and who is signed in. Public routes: they are how one
 * signs in; sign-out and the session's principal concern only the caller's own cookie.
 */
@Controller('svc')
@Access('public')
export class SignInController {
  constructor(
    private readonly signIn: SignInService,
    private readonly access: RequestAccessService,
    private readonly config: AppConfig,
  ) {}

  @Get('sign-in')
  @RawData()
  async start(@Req() req: Request, @Res() res: Response): Promise<void> {
    this.requireEnabled();
    const { sessionId, location } = await this.signIn.start(this.callbackUrl(req));
    res.cookie(SIGN_IN_COOKIE, sessionId, this.cookieOptions(req, SIGN_IN_PATH, 600_000));
    res.redirect(303, location);
  }

  @Get('sign-in/callback')
  @RawData()
  async callback(@Req() req: Request, @Res() res: Response): Promise<void> {
    this.requireEnabled();
    const currentUrl = new URL(req.originalUrl, publicBaseUrl(req, this.config.publicBaseUrl));
    const { sessionId } = await this.signIn.finish(signInCookieOf(req), currentUrl);
    res.clearCookie(SIGN_IN_COOKIE, this.cookieOptions(req, SIGN_IN_PATH));
    res.cookie(
      SESSION_COOKIE,
      sessionId,
      this.cookieOptions(req, '/svc', this.signIn.sessionLifetimeMs),
    );
    res.redirect(303, '/svc/');
  }

  @Post('sign-out')
  @RawData()
  async signOut(@Req() req: Request, @Res() res: Response): Promise<void> {
    // A cross-site form must not sign the user out either.
    await this.access.principalOf(req).catch((error: unknown) => {
      if (error instanceof ApiError && error.getStatus() === 403) {
        throw error;
      }
    });
    await this.signIn.signOut(sessionCookieOf(req));
    res.clearCookie(SESSION_COOKIE, this.cookieOptions(req, '/svc'));
    res.redirect(303, '/svc/');
  }

  /** Who the page is signed in as (JSON), and whether it can sign in at all. */
  @Get('session')
  @RawData()
  async session(@Req() req: Request, @Res() res: Response): Promise<void> {
    const principal =
      this.signIn.enabled && sessionCookieOf(req) !== null
        ? await this.access.principalOf(req).catch(() => null)
        : null;
    res
      .status(200)
      .set('Cache-Control', 'no-store')
      .json({
        signInAvailable: this.signIn.enabled,
        principal: principal?.source === 'oidc' ? principal.name : null,
        roles: principal?.source === 'oidc' ? principal.roles : [],
      });
  }

  private requireEnabled(): void {
    if (!this.signIn.enabled) {
      throw new ApiError(
        HttpStatus.NOT_FOUND,
        'Signing in is not configured: AUTH_MODE must include oidc and OIDC_CLIENT_ID be set.',
      );
    }
  }

  private callbackUrl(req: Request): string {
    return `${publicBaseUrl(req, this.config.publicBaseUrl)}${SIGN_IN_PATH}/callback`;
  }

  /** HttpOnly, SameSite=Lax (sent on the provider's redirect back, not on cross-site posts), Secure behind https. */
  private cookieOptions(req: Request, path: string, maxAge?: number) {
    return {
      httpOnly: true,
      sameSite: 'lax' as const,
      secure: publicBaseUrl(req, this.config.publicBaseUrl).startsWith('https:'),
      path,
      ...(maxAge === undefined ? {} : { maxAge }),
    };
  }
}
